package storeclient_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestParseNamesTheProblemNotTheURL: each mode's URL form is go-redis's;
// what is wrong is named, and no error repeats the URL or its password.
func TestParseNamesTheProblemNotTheURL(t *testing.T) {
	const pw = "s3cr3t-pa55"
	for _, c := range []struct{ mode, url, want string }{
		{"", "http://u:" + pw + "@h:6379", "not a valid standalone URL"},
		{"standalone", "redis://u:" + pw + "@h:6379/x", "not a valid standalone URL"},
		{"sentinel", "redis://:" + pw + "@h:26379", "needs master_name"},
		{"sentinel", "redis://:" + pw + "@h:26379?master_name=m&bogus=" + pw, "not a valid sentinel URL"},
		{"cluster", "redis://u:" + pw + "@h:6379?addr=h2&nope=1", "not a valid cluster URL"},
		{"cluster", "rediss://u:" + pw + "@h:6379?skip_verify=true", "skip_verify"},
		{"ring", "redis://h", `store.redis_mode is "ring"`},
	} {
		_, err := storeclient.Parse(c.mode, secret.Value(c.url))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want %q", c.mode, secret.RedactURL(c.url), err, c.want)
			continue
		}
		if strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), "@h") {
			t.Errorf("%s: the error repeats the URL: %v", c.mode, err)
		}
	}
	for _, c := range []struct{ mode, url string }{
		{"", "unix:///run/redis.sock"},
		{"standalone", "rediss://u:p@h:6380/2"},
		{"sentinel", "redis://:sp@s1:26379?master_name=m&addr=s2:26379&username=u&password=p"},
		{"cluster", "redis://u:p@n1:6379?addr=n2:6379"},
	} {
		if _, err := storeclient.Parse(c.mode, secret.Value(c.url)); err != nil {
			t.Errorf("%s %s: %v", c.mode, c.url, err)
		}
	}
}

// TestOpenOptions: every client ends a round trip at its context's
// deadline, the sentinel password and pool size apply, and a CA file
// needs rediss://.
func TestOpenOptions(t *testing.T) {
	c, err := storeclient.Open(storeclient.Options{Mode: storeclient.Sentinel, URL: "redis://s1:26379?master_name=m",
		SentinelPassword: "sp", PoolSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if o := c.UniversalClient.(*redis.Client).Options(); !o.ContextTimeoutEnabled || o.PoolSize != 7 || c.Mode() != storeclient.Sentinel || c.Sharded() {
		t.Fatalf("sentinel client: context timeouts %v, pool %d, mode %s", o.ContextTimeoutEnabled, o.PoolSize, c.Mode())
	}
	cc, err := storeclient.Open(storeclient.Options{Mode: storeclient.Cluster, URL: "redis://n1:6379"})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if o := cc.UniversalClient.(*redis.ClusterClient).Options(); !o.ContextTimeoutEnabled || !cc.Sharded() || cc.PublishCommand() != "spublish" {
		t.Fatalf("cluster client: context timeouts %v, sharded %v", o.ContextTimeoutEnabled, cc.Sharded())
	}
	if _, err := storeclient.Open(storeclient.Options{URL: "redis://h", CAFile: "/x.pem"}); err == nil || !strings.Contains(err.Error(), "rediss://") {
		t.Fatalf("a CA file on redis://: %v", err)
	}
	if _, err := storeclient.Open(storeclient.Options{URL: "redis://h", SentinelPassword: "x"}); err == nil {
		t.Fatal("a sentinel password outside sentinel mode was accepted")
	}
	bad := filepath.Join(t.TempDir(), "ca.pem")
	_ = os.WriteFile(bad, []byte("not a certificate"), 0o600)
	if _, err := storeclient.Open(storeclient.Options{URL: "rediss://h", CAFile: bad}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("a CA file without a certificate: %v", err)
	}
}

// TestClusterSingleEndpointAndShardedPubSub: a cluster reached through one
// node's address (as a managed configuration endpoint is) finds every
// master; sharded subscriptions on channels of different slots are merged
// into one Subscription, with their confirmations; Close ends Receive.
func TestClusterSingleEndpointAndShardedPubSub(t *testing.T) {
	cl := mcptest.StartRedisCluster(t, 3)
	c, err := storeclient.Open(storeclient.Options{Mode: storeclient.Cluster, URL: secret.Value("redis://" + cl.Nodes[0].Addr)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.PingAll(ctx); err != nil {
		t.Fatal(err)
	}
	chans := []string{"x{a}", "x{b}", "x{c}", "x{d}"}
	sub := c.Listen(ctx, chans...)
	seen := map[string]bool{}
	for len(seen) < len(chans) {
		m, err := sub.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ch, ok := storeclient.Confirmed(m); ok {
			seen[ch] = true
		}
	}
	for _, ch := range chans {
		if n, err := c.Publish(ctx, ch, "hi "+ch).Result(); err != nil || n != 1 {
			t.Fatalf("SPUBLISH %s: %d receivers, %v", ch, n, err)
		}
	}
	got := map[string]bool{}
	for len(got) < len(chans) {
		m, err := sub.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if msg, ok := m.(*redis.Message); ok {
			got[msg.Payload] = true
		}
	}
	_ = sub.Close()
	if _, err := sub.Receive(ctx); err != redis.ErrClosed {
		t.Fatalf("Receive after Close: %v", err)
	}
}
