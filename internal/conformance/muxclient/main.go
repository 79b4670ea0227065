// Command muxclient lets the MCP conformance suite test mcp-mux as a
// client: it runs mcp-mux with one HTTP upstream — the scenario's server —
// and drives the scenario through the mux with a go-sdk client:
//
//   - initialize: discovery only (the mux initializes and lists);
//
//   - tools_call: calls add_numbers through the mux;
//
//   - sse-retry: calls test_reconnection, whose stream the server ends
//     early: the mux resumes it with GET + Last-Event-ID after the retry
//     delay the server set;
//
//   - auth/client-credentials-*: the upstream is configured for OAuth
//     client_credentials with only the client id and secret the scenario
//     provides (the token endpoint is discovered); lists the tools;
//
//   - any other auth/*: a connected-account upstream (oauth grant_type
//     authorization_code; with -detect, no oauth block at all) and
//     inbound.public_url at the mux's own listener. The client calls
//     connect_account, lists the tools and calls the upstream's first
//     tool (connecting again when no tool appears and the mux asked for
//     a new consent); each consent the mux asks for (a URL-mode elicitation) is
//     "approved" by fetching its URL: the scenario's authorization server
//     redirects straight to the mux's /oauth/callback.
//
// Flags come before the server URL the harness appends:
//
//	MCP_CONFORMANCE_SCENARIO=auth/metadata-default muxclient [-era 2026-07-28] [-detect] SERVER_URL
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/accounts"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// main runs the scenario and exits 1 when it fails.
func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "muxclient:", err)
		os.Exit(1)
	}
}

// flags are muxclient's options.
type flags struct {
	era    string // the client's protocol version: "2025-11-25", "2026-07-28" (the go-sdk default)
	detect bool   // connected account without an oauth block
}

// run runs the scenario MCP_CONFORMANCE_SCENARIO names against the server
// at the URL in os.Args through an in-process mux.
func run() error {
	var f flags
	fs := flag.NewFlagSet("muxclient", flag.ContinueOnError)
	fs.StringVar(&f.era, "era", "", "the client's protocol version (default: 2025-11-25 for an authorization-code scenario, else the go-sdk's default)")
	fs.BoolVar(&f.detect, "detect", false, "configure the upstream without an oauth block (detection from its Bearer challenge)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: muxclient [-era V] [-detect] SERVER_URL")
	}
	serverURL, scenario := fs.Arg(0), os.Getenv("MCP_CONFORMANCE_SCENARIO")
	// The mux logs to stderr at debug level: the tests read it (the
	// harness keeps it with -o) for secrets that must never be logged.
	log := hclog.New(&hclog.LoggerOptions{Name: "muxclient", Output: os.Stderr, Level: hclog.Debug})
	if authCode(scenario) {
		return runAccounts(serverURL, scenario, f, log)
	}
	cfg, err := muxConfig(serverURL, scenario)
	if err != nil {
		return err
	}
	srv := proxy.New(proxy.Options{Logger: log})
	if err := srv.Apply(cfg); err != nil {
		return err
	}
	defer closeMux(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.WaitDiscovery(ctx); err != nil {
		return err
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "muxclient", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp"}, sessionOptions(f.era))
	if err != nil {
		return err
	}
	defer cs.Close()
	return drive(ctx, cs, scenario)
}

// authCode reports whether scenario is an authorization-code one (every
// auth scenario but the client-credentials extensions).
func authCode(scenario string) bool {
	return strings.HasPrefix(scenario, "auth/") && !strings.HasPrefix(scenario, "auth/client-credentials-")
}

// sessionOptions pins the client's protocol version, if era names one.
func sessionOptions(era string) *mcp.ClientSessionOptions {
	if era == "" {
		return nil
	}
	return &mcp.ClientSessionOptions{ProtocolVersion: era}
}

// muxConfig returns the mux's config: one HTTP upstream at serverURL, with
// OAuth client_credentials from MCP_CONFORMANCE_CONTEXT for an auth/*
// scenario.
func muxConfig(serverURL, scenario string) (*config.Config, error) {
	upstreamCfg := map[string]any{"type": "http", "url": serverURL}
	env := map[string]string{}
	if strings.HasPrefix(scenario, "auth/") {
		if err := addOAuth(upstreamCfg, env); err != nil {
			return nil, err
		}
	}
	return parseConfig(map[string]any{"mcpServers": map[string]any{"upstream": upstreamCfg}}, env)
}

// parseConfig parses doc, resolving $VARs from env.
func parseConfig(doc map[string]any, env map[string]string) (*config.Config, error) {
	b, _ := json.Marshal(doc)
	cfg, err := config.Parse(b, config.LoadOptions{Filename: "muxclient.json", LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if err != nil {
		return nil, err
	}
	if len(cfg.Invalid) > 0 {
		return nil, fmt.Errorf("config: %v", cfg.Invalid[0])
	}
	return cfg, nil
}

// scenarioContext is MCP_CONFORMANCE_CONTEXT's client (pre-registration
// and the client-credentials scenarios).
type scenarioContext struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

func readContext() (scenarioContext, error) {
	var sc scenarioContext
	if err := json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &sc); err != nil {
		return sc, fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
	}
	return sc, nil
}

// addOAuth configures upstreamCfg for OAuth client_credentials with the
// client id and secret of MCP_CONFORMANCE_CONTEXT, which go to env.
func addOAuth(upstreamCfg map[string]any, env map[string]string) error {
	sc, err := readContext()
	if err != nil {
		return err
	}
	env["CLIENT_ID"], env["CLIENT_SECRET"] = sc.ClientID, sc.ClientSecret
	upstreamCfg["oauth"] = map[string]any{"grant_type": "client_credentials", "client_id": "$CLIENT_ID", "client_secret": "$CLIENT_SECRET"}
	return nil
}

// closeMux closes srv within five seconds.
func closeMux(srv *proxy.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Close(ctx)
}

// drive lists the tools through the mux and calls the scenario's tool, if
// it has one.
func drive(ctx context.Context, cs *mcp.ClientSession, scenario string) error {
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Printf("listed %d tools through mcp-mux\n", len(res.Tools))
	tool, args, err := scenarioCall(scenario, len(res.Tools))
	if err != nil || tool == "" {
		return err
	}
	return callTool(ctx, cs, tool, args)
}

// callTool calls tool through the mux; a tool error fails.
func callTool(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) error {
	out, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return err
	}
	if out.IsError {
		return fmt.Errorf("%s: tool error %s", tool, contentText(out))
	}
	fmt.Printf("called %s through mcp-mux: %s\n", tool, contentText(out))
	return nil
}

// contentText is a result's text content.
func contentText(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}

// scenarioCall returns the tool call the scenario makes ("" for none),
// given how many tools the mux listed; an auth scenario fails when it
// listed none.
func scenarioCall(scenario string, tools int) (string, map[string]any, error) {
	switch {
	case scenario == "tools_call":
		return "upstream_add_numbers", map[string]any{"a": 5, "b": 3}, nil
	case scenario == "sse-retry":
		return "upstream_test_reconnection", map[string]any{}, nil
	case strings.HasPrefix(scenario, "auth/") && tools == 0:
		return "", nil, fmt.Errorf("the upstream was not discovered through the mux")
	}
	return "", nil, nil
}

// runAccounts runs an authorization-code scenario: mcp-mux is the OAuth
// client of the scenario's server on behalf of the go-sdk client's user.
func runAccounts(serverURL, scenario string, f flags, log hclog.Logger) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	publicURL := "http://" + ln.Addr().String()
	cfg, err := accountsConfig(serverURL, publicURL, scenario, f.detect)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "muxclient-accounts")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := accounts.OpenBoltStore(accounts.BoltOptions{Dir: dir})
	if err != nil {
		return err
	}
	defer store.Close()
	// A per-user server is discovered once a user connected, at the next
	// round of its rediscovery backoff (nothing wakes it on a consent):
	// short rounds keep the scenario well within the harness's timeout.
	srv := proxy.New(proxy.Options{Logger: log, AccountStore: store, RetryMin: 250 * time.Millisecond, RetryMax: time.Second})
	if err := srv.Apply(cfg); err != nil {
		return err
	}
	defer closeMux(srv)
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()

	// Within the harness's --timeout (the tests give 60s).
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	// The first discovery round tells a server with no oauth block that
	// asks for a Bearer token (-detect) from one that does not.
	if err := srv.WaitDiscovery(ctx); err != nil {
		return err
	}
	// A 2026-07-28 client is the go-sdk's default: it negotiates its
	// latest version.
	era := f.era
	switch era {
	case "":
		era = "2025-11-25"
	case "2026-07-28":
		era = ""
	}
	var consents atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "muxclient", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return approve(ctx, req, &consents)
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: publicURL + "/mcp"}, sessionOptions(era))
	if err != nil {
		return err
	}
	defer cs.Close()
	fmt.Printf("connected to mcp-mux at protocol version %s\n", cs.InitializeResult().ProtocolVersion)
	err = driveAccounts(ctx, cs, &consents)
	fmt.Printf("consents approved: %d\n", consents.Load())
	return err
}

// accountsConfig is the mux's config for an authorization-code scenario:
// the scenario's server as a connected-account upstream, the mux's own
// listener as inbound.public_url.
func accountsConfig(serverURL, publicURL, scenario string, detect bool) (*config.Config, error) {
	upstreamCfg := map[string]any{"type": "http", "url": serverURL}
	env := map[string]string{}
	if !detect {
		oauth := map[string]any{"grant_type": "authorization_code"}
		switch scenario {
		case "auth/basic-cimd":
			oauth["client_metadata_url"] = "https://conformance-test.local/client-metadata.json"
		case "auth/pre-registration":
			sc, err := readContext()
			if err != nil {
				return nil, err
			}
			env["CLIENT_SECRET"] = sc.ClientSecret
			oauth["client_id"], oauth["client_secret"] = sc.ClientID, "$CLIENT_SECRET"
		}
		upstreamCfg["oauth"] = oauth
	}
	return parseConfig(map[string]any{
		"inbound":    map[string]any{"public_url": publicURL},
		"mcpServers": map[string]any{"upstream": upstreamCfg},
	}, env)
}

// approve is the user approving a consent: it opens the URL (the test
// authorization server redirects at once to the mux's callback) and
// accepts. Consents come one at a time: the test authorization server
// keeps only the last PKCE challenge.
func approve(ctx context.Context, req *mcp.ElicitRequest, consents *atomic.Int32) (*mcp.ElicitResult, error) {
	p := req.Params
	if p.Mode != "url" || p.URL == "" {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	n := consents.Add(1)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("opening the consent URL: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	fmt.Printf("consent %d: the browser ended at %s (%d)\n", n, resp.Request.URL.Path, resp.StatusCode)
	return &mcp.ElicitResult{Action: "accept"}, nil
}

// driveAccounts connects the user's account (connect_account), lists the
// upstream's tools and calls the first. The tools of a connected-account
// server appear once a user connected and the mux's discovery with that
// token succeeded; when they do not, the user connects again (the server
// may have refused the token: the mux then asks for a new consent), at
// most three times, while connecting asked for a consent.
func driveAccounts(ctx context.Context, cs *mcp.ClientSession, consents *atomic.Int32) error {
	for round := 0; round < 3; round++ {
		before := consents.Load()
		if err := callTool(ctx, cs, "connect_account", map[string]any{"server": "upstream"}); err != nil {
			return err
		}
		tool, err := upstreamTool(ctx, cs, 8*time.Second)
		if err != nil {
			return err
		}
		if tool != "" {
			return callTool(ctx, cs, tool, map[string]any{})
		}
		if consents.Load() == before {
			break // connected already, and still no tools
		}
	}
	return errors.New("the upstream's tools were not discovered through the mux after connecting")
}

// upstreamTool polls the tool list for up to wait and returns the first
// of the upstream's tools, "" when none appeared.
func upstreamTool(ctx context.Context, cs *mcp.ClientSession, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			return "", err
		}
		for _, t := range res.Tools {
			if strings.HasPrefix(t.Name, "upstream_") {
				return t.Name, nil
			}
		}
		if time.Now().After(deadline) {
			return "", nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
