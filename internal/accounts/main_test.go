package accounts

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/seal"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const sealKey = "accounts-test-request-state-key-0123456789"

// storeKinds are the stores every table test runs on.
var storeKinds = []string{"bolt", "redis", "cluster"}

// newStoreFn returns a maker of stores of kind sharing one backend (one
// bbolt file is opened once; Redis stores share a server and a prefix).
func newStoreFn(t *testing.T, kind string) func() Store {
	t.Helper()
	switch kind {
	case "bolt":
		s, err := OpenBoltStore(BoltOptions{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return func() Store { return s }
	case "redis":
		rs := mcptest.StartRedis(t, false)
		c := storeclient.Wrap(redis.NewClient(&redis.Options{Addr: rs.Addr}))
		t.Cleanup(func() { _ = c.Close() })
		return redisMaker(t, c)
	default:
		cl := mcptest.StartRedisCluster(t, 3)
		c, err := storeclient.Open(storeclient.Options{Mode: storeclient.Cluster, URL: secret.Value(cl.URL())})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return redisMaker(t, c)
	}
}

func redisMaker(t *testing.T, c *storeclient.Client) func() Store {
	return func() Store {
		s := NewRedisStore(RedisOptions{Client: c, KeyPrefix: "t:"})
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

// forStores runs fn on each store kind.
func forStores(t *testing.T, fn func(t *testing.T, store func() Store)) {
	for _, k := range storeKinds {
		t.Run(k, func(t *testing.T) { fn(t, newStoreFn(t, k)) })
	}
}

// env is a Manager whose handler is served, on a fixture.
type env struct {
	t    *testing.T
	f    *fixture
	m    *Manager
	mux  *httptest.Server
	log  *mcptest.LogBuffer
	errs []error
	emu  sync.Mutex
}

// newEnv makes a Manager on store for the fixture's server "srv".
func newEnv(t *testing.T, f *fixture, store Store, opt func(*Options), sc ...func(*ServerConfig)) *env {
	t.Helper()
	e := &env{t: t, f: f, log: &mcptest.LogBuffer{}}
	e.mux = httptest.NewUnstartedServer(nil)
	t.Cleanup(e.mux.Close)
	o := Options{
		PublicURL: "http://" + e.mux.Listener.Addr().String(), Sealer: seal.New(sealKey), Store: store, Replica: "r1",
		Logger:     hclog.New(&hclog.LoggerOptions{Output: e.log, Level: hclog.Trace}),
		HTTPClient: &http.Client{Timeout: time.Second},
	}
	if opt != nil {
		opt(&o)
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	e.mux.Config.Handler = m.Handler()
	e.mux.Start()
	cfg := ServerConfig{Name: "srv", URL: f.url()}
	for _, fn := range sc {
		fn(&cfg)
	}
	m.Configure([]ServerConfig{cfg})
	e.m = m
	t.Cleanup(e.noMarkers)
	return e
}

// keep records an error for the marker check.
func (e *env) keep(err error) error {
	if err != nil {
		e.emu.Lock()
		e.errs = append(e.errs, err)
		e.emu.Unlock()
	}
	return err
}

// start starts a consent for user.
func (e *env) start(user string, r StartRequest) (*Consent, error) {
	r.User, r.Server = user, "srv"
	c, err := e.m.Start(context.Background(), r)
	return c, e.keep(err)
}

// open follows the consent URL as a browser does (the AS redirects to the
// callback) and returns the page's status and text.
func (e *env) open(u string) (int, string) {
	e.t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		e.t.Fatalf("opening the consent URL: %v", err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// get GETs a URL and returns the status and body.
func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// connect runs a whole consent for user and waits for it.
func (e *env) connect(user string) {
	e.t.Helper()
	c, err := e.start(user, StartRequest{})
	if err != nil {
		e.t.Fatalf("Start: %v", err)
	}
	if st, body := e.open(c.URL); st != 200 {
		e.t.Fatalf("callback answered %d: %s", st, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.keep(e.m.Wait(ctx, c.ID)); err != nil {
		e.t.Fatalf("Wait: %v", err)
	}
}

// token is Token with a timeout.
func (e *env) token(user string) (secret.Value, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := e.m.Token(ctx, user, "srv")
	return v, e.keep(err)
}

// boltEnv is newEnv on a fresh bbolt store.
func boltEnv(t *testing.T, f *fixture, opt func(*Options), sc ...func(*ServerConfig)) (*env, *BoltStore) {
	t.Helper()
	s, err := OpenBoltStore(BoltOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return newEnv(t, f, s, opt, sc...), s
}

// waitAsync runs Wait in the background; its error arrives on the channel.
func (e *env) waitAsync(id string) <-chan error {
	ch := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ch <- e.keep(e.m.Wait(ctx, id))
	}()
	return ch
}

// offsetClock is the time plus a settable offset.
type offsetClock struct {
	mu sync.Mutex
	d  time.Duration
}

func (c *offsetClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.d)
}

func (c *offsetClock) set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.d = d
}

// tokensAtOnce calls Token for user n times at once, spread over envs.
func tokensAtOnce(t *testing.T, user string, n int, envs ...*env) []string {
	var wg sync.WaitGroup
	got := make([]string, n)
	for i := range n {
		wg.Go(func() {
			v, err := envs[i%len(envs)].token(user)
			if err != nil {
				t.Errorf("Token: %v", err)
			}
			got[i] = v.Reveal()
		})
	}
	wg.Wait()
	return got
}
