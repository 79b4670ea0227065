// Command muxclient lets the MCP conformance suite test mcp-mux as a
// client: it runs mcp-mux with one HTTP upstream — the scenario's server —
// waits for discovery and drives the scenario through the mux:
//
//   - initialize: discovery only (the mux initializes and lists);
//
//   - tools_call: calls add_numbers through the mux;
//
//   - sse-retry: calls test_reconnection, whose stream the server ends
//     early: the mux resumes it with GET + Last-Event-ID after the retry
//     delay the server set;
//
//   - auth/*: the upstream is configured for OAuth client_credentials with
//     only the client id and secret the scenario provides (the token
//     endpoint is discovered); lists the tools through the mux.
//
//     MCP_CONFORMANCE_SCENARIO=tools_call muxclient SERVER_URL
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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

// run runs the scenario MCP_CONFORMANCE_SCENARIO names against the server
// at the URL in os.Args through an in-process mux.
func run() error {
	if len(os.Args) != 2 {
		return fmt.Errorf("usage: muxclient SERVER_URL")
	}
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	cfg, err := muxConfig(os.Args[1], scenario)
	if err != nil {
		return err
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "muxclient", Output: os.Stderr, Level: hclog.Info})
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
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp"}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	return drive(ctx, cs, scenario)
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
	doc, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"upstream": upstreamCfg}})
	cfg, err := config.Parse(doc, config.LoadOptions{Filename: "muxclient.json", LookupEnv: func(k string) (string, bool) {
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

// addOAuth configures upstreamCfg for OAuth client_credentials with the
// client id and secret of MCP_CONFORMANCE_CONTEXT, which go to env.
func addOAuth(upstreamCfg map[string]any, env map[string]string) error {
	var sc struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &sc); err != nil {
		return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
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
	out, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return err
	}
	if out.IsError {
		return fmt.Errorf("%s: tool error %v", tool, out.Content)
	}
	fmt.Printf("called %s through mcp-mux\n", tool)
	return nil
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
