package accounts

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sync/singleflight"

	"github.com/mcp-mux/mcp-mux/internal/headers"
	"github.com/mcp-mux/mcp-mux/internal/seal"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// Options configure a Manager.
type Options struct {
	// PublicURL is the base URL browsers reach the mux at (inbound.public_url,
	// no trailing slash): the redirect URI is PublicURL+"/oauth/callback",
	// the client metadata document PublicURL+"/oauth/client-metadata.json".
	PublicURL string
	// Sealer seals state tokens and everything the Store keeps; replicas
	// must share its secret (inbound.request_state_key).
	Sealer *seal.Sealer
	Store  Store
	// Replica names this process in pending records (informational).
	Replica string
	Logger  hclog.Logger
	// HTTPClient makes the discovery, registration and token requests;
	// nil: a client with a 10 s timeout. Registration and token requests
	// never follow redirects; their timeout is at most 10 s.
	HTTPClient *http.Client
	Now        func() time.Time
	// StateTTL is a pending consent's lifetime (default 10m).
	StateTTL time.Duration
	// MaxPendingPerUser (default 5) and MaxPending (default 10000, across
	// the fleet) bound pending consents.
	MaxPendingPerUser int
	MaxPending        int
	// RefreshBefore: a token that expires within it is refreshed first
	// (default 60s).
	RefreshBefore time.Duration
}

// ServerConfig is one per-user server.
type ServerConfig struct {
	// Name is the server's configured name; URL its MCP endpoint exactly
	// as configured (the RFC 8707 resource).
	Name, URL string
	// ClientID (with ClientSecret) is a pre-registered client.
	ClientID     string
	ClientSecret secret.Value
	// ClientMetadataURL is the client id when the authorization server
	// supports Client ID Metadata Documents.
	ClientMetadataURL string
	// Scope is asked for when neither the challenge nor the resource
	// metadata names one.
	Scope string
	// AuthorizationURL and TokenURL override the discovered endpoints.
	AuthorizationURL, TokenURL string
	// Detected: the server has no oauth block; its Bearer challenge
	// made it per-user.
	Detected bool
}

// Retry is what Rejected tells the caller to do.
type Retry struct {
	Again  bool     // send the call again with Token's (refreshed) token
	StepUp []string // start a consent for these scopes (StartRequest.StepUp)
}

// Errors callers branch on.
var (
	// ErrNotConnected: the user has no usable token for the server; a
	// consent is needed.
	ErrNotConnected = errors.New("the account is not connected")
	// ErrTooManyConsents: a bound on pending consents refused a Start.
	ErrTooManyConsents = errors.New("too many consents pending")
	// ErrUnknownServer: the server is not a configured per-user server.
	ErrUnknownServer = errors.New("not a per-user server")
)

// Bounds of caller-chosen values.
const (
	maxUserLen      = 1024
	maxServerLen    = 256
	maxSessionLen   = 1024
	maxScopes       = 32
	maxScopeLen     = 256
	maxChallenges   = 16
	maxChallengeLen = 8 << 10
	maxTokenLen     = 12 << 10         // an access or refresh token
	lockTTL         = 30 * time.Second // longer than a refresh may take
	resultGrace     = 30 * time.Second // a taken consent's exchange may still be running
	defaultTimeout  = 10 * time.Second
)

// Manager runs connected accounts: consents, the callback, the vault. It
// is safe for concurrent use.
type Manager struct {
	o          Options
	log        hclog.Logger
	store      Store
	state      *seal.Purpose // state tokens: carry a pending consent's id
	vault      *seal.Purpose // vault entries and pending records, bound to their key
	regs       *seal.Purpose // client registrations, bound to their key
	hc         *http.Client  // discovery
	direct     *http.Client  // probe, registration, token: no redirects, bounded
	redirect   string
	cimd       string
	pages      pages // the callback's answers
	sf         singleflight.Group
	stopListen func()

	mu      sync.Mutex
	servers map[string]ServerConfig
	local   map[string]localConsent // consents started here, by id
	waits   waiters
	tally   tally
}

// New checks o, fills in its defaults and returns a Manager listening for
// results on o.Store (on Redis: subscribed to its channel).
func New(o Options) (*Manager, error) {
	if o.Sealer == nil || o.Store == nil {
		return nil, errors.New("accounts: a Sealer and a Store are required")
	}
	var https bool
	var err error
	if o.PublicURL, https, err = checkPublicURL(o.PublicURL); err != nil {
		return nil, err
	}
	o = withDefaults(o)
	m := &Manager{
		o: o, log: o.Logger, store: o.Store,
		state:    o.Sealer.Purpose("accounts oauth state v1", "mo1."),
		vault:    o.Sealer.Purpose("accounts vault v1", "mv1."),
		regs:     o.Sealer.Purpose("accounts registration v1", "mr1."),
		hc:       o.HTTPClient,
		direct:   headers.WithoutRedirects(o.HTTPClient),
		redirect: o.PublicURL + "/oauth/callback",
		pages:    newPages(),
		servers:  map[string]ServerConfig{},
		local:    map[string]localConsent{},
	}
	if m.direct.Timeout <= 0 || m.direct.Timeout > defaultTimeout {
		m.direct.Timeout = defaultTimeout
	}
	if https {
		m.cimd = o.PublicURL + "/oauth/client-metadata.json"
	}
	m.stopListen = o.Store.listen(m.waits.wake)
	return m, nil
}

// withDefaults fills in o's zero fields.
func withDefaults(o Options) Options {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: defaultTimeout}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.StateTTL <= 0 {
		o.StateTTL = seal.StateTTL
	}
	if o.MaxPendingPerUser <= 0 {
		o.MaxPendingPerUser = 5
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 10000
	}
	if o.RefreshBefore <= 0 {
		o.RefreshBefore = 60 * time.Second
	}
	return o
}

// Configure replaces the per-user servers (on every reload). Consents
// pending here for a server no longer listed fail; tokens stay stored.
func (m *Manager) Configure(servers []ServerConfig) {
	next := make(map[string]ServerConfig, len(servers))
	for _, s := range servers {
		next[s.Name] = s
	}
	m.mu.Lock()
	m.servers = next
	var gone []string
	for id, c := range m.local {
		if _, ok := next[c.server]; !ok {
			gone = append(gone, id)
			delete(m.local, id)
		}
	}
	m.mu.Unlock()
	for _, id := range gone {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m.finish(ctx, id, "", outcome{Reason: "removed", Message: "the server was removed from the configuration"})
		cancel()
	}
}

// localConsent is a consent started by this Manager.
type localConsent struct {
	server  string
	expires time.Time
}

// server returns the configuration of a per-user server.
func (m *Manager) server(name string) (ServerConfig, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.servers[name]
	return s, ok
}

// Close stops listening for results; it leaves the Store open.
func (m *Manager) Close() error {
	m.stopListen()
	return nil
}

// validID reports whether id looks like a consent id (rand.Text: 26
// base32 characters).
func validID(id string) bool {
	if len(id) != 26 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}
