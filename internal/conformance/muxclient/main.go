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

	"github.com/mcp-mux/mcp-mux/config"
	"github.com/mcp-mux/mcp-mux/proxy"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "muxclient:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) != 2 {
		return fmt.Errorf("usage: muxclient SERVER_URL")
	}
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	upstreamCfg := map[string]any{"type": "http", "url": os.Args[1]}
	env := map[string]string{}
	auth := strings.HasPrefix(scenario, "auth/")
	if auth {
		var sc struct {
			ClientID     string `json:"client_id"`
			ClientSecret string `json:"client_secret"`
		}
		if err := json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &sc); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
		env["CLIENT_ID"], env["CLIENT_SECRET"] = sc.ClientID, sc.ClientSecret
		upstreamCfg["oauth"] = map[string]any{"grant_type": "client_credentials", "client_id": "$CLIENT_ID", "client_secret": "$CLIENT_SECRET"}
	}
	doc, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"upstream": upstreamCfg}})
	cfg, err := config.Parse(doc, config.LoadOptions{Filename: "muxclient.json", LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if err != nil {
		return err
	}
	if len(cfg.Invalid) > 0 {
		return fmt.Errorf("config: %v", cfg.Invalid[0])
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "muxclient", Output: os.Stderr, Level: hclog.Info})
	srv := proxy.New(proxy.Options{Logger: log})
	if err := srv.Apply(cfg); err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	}()
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
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Printf("listed %d tools through mcp-mux\n", len(res.Tools))
	var tool string
	var args map[string]any
	switch {
	case scenario == "tools_call":
		tool, args = "upstream_add_numbers", map[string]any{"a": 5, "b": 3}
	case scenario == "sse-retry":
		tool, args = "upstream_test_reconnection", map[string]any{}
	case auth && len(res.Tools) == 0:
		return fmt.Errorf("the upstream was not discovered through the mux")
	}
	if tool == "" {
		return nil
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
