package nodeclients_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/nodeclients"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// startMux serves mcp-mux in front of npm server-everything over stdio and
// returns the /mcp URL and the mux's log.
func startMux(t *testing.T) (string, *mcptest.LogBuffer) {
	t.Helper()
	cmd, args := nodeclients.ServerEverything(t)
	srv, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"everything": map[string]any{
		"type": "stdio", "command": cmd, "args": args,
	}}})
	cfg, err := config.Parse(srv, config.LoadOptions{Filename: "nodeclients.json"})
	if err != nil || len(cfg.Invalid) > 0 {
		t.Fatalf("config: %v %+v", err, cfg)
	}
	logs := &mcptest.LogBuffer{}
	px := proxy.New(proxy.Options{Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})})
	if err := px.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := px.WaitDiscovery(ctx); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(px.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = px.Close(ctx)
		ts.Close()
	})
	return ts.URL + "/mcp", logs
}

type result struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// drive runs everything.mjs with one client flavour and returns its checks.
func drive(t *testing.T, url, flavor, mode string) map[string]result {
	t.Helper()
	script := nodeclients.Script(t, "everything.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeclients.Node(t), script, flavor, mode, url)
	cmd.Dir = filepath.Dir(script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Errorf("driver %s/%s: %v\nstderr:\n%s", flavor, mode, err, stderr.String())
	}
	got := map[string]result{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r result
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			t.Logf("driver: %s", sc.Text())
			continue
		}
		got[r.Check] = r
	}
	return got
}

// clientChecks are what every TypeScript client must get through the mux
// on 2025-11-25.
var clientChecks = []string{"connect", "tools", "roots", "roots_list_changed", "sampling", "elicitation_form",
	"elicitation_url", "progress", "logging", "resources", "prompts", "completion", "done"}

// modernChecks are what a client that negotiated 2026-07-28 with the mux
// must get. Roots, sampling and elicitation (form and URL) reach it as
// input_required results (the bridge to the legacy server-everything,
// proxy/mrtr.go).
var modernChecks = []string{"connect", "tools", "progress", "resources", "prompts", "completion",
	"roots", "sampling", "elicitation_form", "elicitation_url", "done"}

func TestTypeScriptClients(t *testing.T) {
	url, logs := startMux(t)
	for _, c := range []struct{ flavor, mode string }{
		{"sdk1", "legacy"}, // @modelcontextprotocol/sdk 1.32.2
		{"v2", "legacy"},   // @modelcontextprotocol/client 2.4.0, its default
		{"v2", "auto"},     // probes server/discover first
		{"v2", "modern"},   // pinned to 2026-07-28
	} {
		t.Run(c.flavor+"-"+c.mode, func(t *testing.T) {
			got := drive(t, url, c.flavor, c.mode)
			want := clientChecks
			era := got["era"].Detail
			t.Logf("negotiated %q", era)
			if era >= "2026-07-28" {
				want = modernChecks
			}
			for _, name := range want {
				r, ok := got[name]
				switch {
				case !ok:
					t.Errorf("%s: no result", name)
				case !r.OK:
					t.Errorf("%s failed: %s", name, r.Detail)
				default:
					t.Logf("%s: %s", name, r.Detail)
				}
			}
		})
	}
	if t.Failed() {
		t.Logf("mux log:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "Failed to request roots") {
		t.Errorf("server-everything failed a roots request:\n%s", logs.String())
	}
}

// TestGoSDKClient drives the mux in front of server-everything with the
// go-sdk client and its default options: it probes server/discover first
// (and takes 2026-07-28 when the mux offers it, else falls back to
// initialize). Tools, progress, resources and prompts work either way.
func TestGoSDKClient(t *testing.T) {
	url, logs := startMux(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var progress atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-default", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
	})
	transport := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: &http.Transport{}}}
	defer transport.HTTPClient.Transport.(*http.Transport).CloseIdleConnections()
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, logs.String())
	}
	defer cs.Close()
	t.Logf("negotiated %s", cs.InitializeResult().ProtocolVersion)
	if got := callText(ctx, t, cs, "everything_echo", map[string]any{"message": "hi go"}); !strings.Contains(got, "hi go") {
		t.Errorf("echo = %q", got)
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything_trigger-long-running-operation",
		Arguments: map[string]any{"duration": 0.3, "steps": 3}, Meta: mcp.Meta{"progressToken": "go-p"}})
	if err != nil {
		t.Fatal(err)
	}
	// Progress rides the call's stream, before its result; the go-sdk
	// client may run its handler after CallTool returned.
	for deadline := time.Now().Add(5 * time.Second); progress.Load() < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := progress.Load(); n < 3 {
		t.Errorf("got %d progress notifications, want 3", n)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://resource/static/document/architecture.md"})
	if err != nil || len(rr.Contents) == 0 {
		t.Errorf("read resource: %v %+v", err, rr)
	}
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "everything_args-prompt", Arguments: map[string]string{"city": "Oslo"}})
	if err != nil || !strings.Contains(fmt.Sprint(pr.Messages[0].Content), "Oslo") {
		t.Errorf("get prompt: %v %+v", err, pr)
	}
}

// callText calls a tool and returns its text, failing on a tool error.
func callText(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.IsError {
		t.Errorf("%s: tool error %s", name, b.String())
	}
	return b.String()
}

// TestGoSDKClientServerRequests: the go-sdk client on 2025-11-25 (where
// servers send requests to clients) gets roots, sampling and elicitation
// round trips through the mux.
func TestGoSDKClientServerRequests(t *testing.T) {
	url, logs := startMux(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var elicited []*mcp.ElicitParams
	client := mcp.NewClient(&mcp.Implementation{Name: "go-sdk", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "go-model", Role: "assistant", Content: &mcp.TextContent{Text: "sampled by go"}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			elicited = append(elicited, req.Params)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Grace Hopper"}}, nil
		},
	})
	client.AddRoots(&mcp.Root{URI: "file:///tmp/go-root", Name: "go-root"})
	transport := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: &http.Transport{}}}
	defer transport.HTTPClient.Transport.(*http.Transport).CloseIdleConnections()
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, logs.String())
	}
	defer cs.Close()
	if got := callText(ctx, t, cs, "everything_get-roots-list", map[string]any{}); !strings.Contains(got, "file:///tmp/go-root") {
		t.Errorf("get-roots-list = %q", got)
	}
	if got := callText(ctx, t, cs, "everything_trigger-sampling-request", map[string]any{"prompt": "p", "maxTokens": 5}); !strings.Contains(got, "sampled by go") {
		t.Errorf("sampling = %q", got)
	}
	if got := callText(ctx, t, cs, "everything_trigger-elicitation-request", map[string]any{}); !strings.Contains(got, "Grace Hopper") {
		t.Errorf("elicitation = %q", got)
	}
	if len(elicited) != 1 || elicited[0].Mode != "" {
		t.Errorf("elicitation params = %+v, want one without a mode (the server sent none)", elicited)
	}
}

// TestClientWithoutCapabilities checks capability mirroring: a client that
// declares nothing gets upstream sessions that declare nothing, so the
// server neither asks it for roots nor offers it the tools that need them.
func TestClientWithoutCapabilities(t *testing.T) {
	url, logs := startMux(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "bare", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	transport := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: &http.Transport{}}}
	defer transport.HTTPClient.Transport.(*http.Transport).CloseIdleConnections()
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if c := cs.InitializeResult(); c == nil {
		t.Fatal("no initialize result")
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything_echo", Arguments: map[string]any{"message": "bare"}})
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
	// The catalog lists it (discovery declares every capability), but this
	// client's upstream session never registered it.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything_get-roots-list", Arguments: map[string]any{}})
	if err == nil && !res.IsError {
		t.Errorf("get-roots-list worked for a client without roots: %+v", res.Content)
	}
	if strings.Contains(logs.String(), "Failed to request roots") {
		t.Errorf("the upstream asked a client without roots for them:\n%s", logs.String())
	}
}

// TestModernURLElicitationKeepsItsID: server-everything's URL elicitation
// reaches a 2026-07-28 client's input_required with every param the server
// sent, elicitationId included (the TypeScript v2 client's own 2026-07-28
// schema drops that field before its handler runs, see everything.mjs), and
// the client's answer completes the call.
func TestModernURLElicitationKeepsItsID(t *testing.T) {
	url, logs := startMux(t)
	const name = "everything_trigger-url-elicitation"
	call := func(extra string) (json.RawMessage, string) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{` +
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
			`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{},"url":{}}}},` +
			`"name":"` + name + `","arguments":{"url":"https://example.com/mux-consent","elicitationId":"mux-e-1"}` + extra + `}}`
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name} {
			req.Header.Set(k, v)
		}
		client := &http.Client{Transport: &http.Transport{}, Timeout: time.Minute}
		defer client.Transport.(*http.Transport).CloseIdleConnections()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(b), "\n") {
			var r struct {
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &r) == nil && (r.Result != nil || r.Error != nil) {
				if r.Error != nil {
					t.Fatalf("tools/call: %s\n%s", r.Error, logs.String())
				}
				return r.Result, string(r.Result)
			}
		}
		t.Fatalf("no response in %q", b)
		return nil, ""
	}
	raw, text := call("")
	var ir struct {
		ResultType    string `json:"resultType"`
		InputRequests map[string]struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		} `json:"inputRequests"`
		RequestState string `json:"requestState"`
	}
	if json.Unmarshal(raw, &ir) != nil || ir.ResultType != "input_required" || len(ir.InputRequests) != 1 {
		t.Fatalf("want one input request, got %s", text)
	}
	var key string
	for k, r := range ir.InputRequests {
		key = k
		p := r.Params
		if r.Method != "elicitation/create" || p["mode"] != "url" || p["url"] != "https://example.com/mux-consent" ||
			p["elicitationId"] != "mux-e-1" || p["message"] == nil {
			t.Errorf("input request %s %v: want a URL elicitation with the server's elicitationId", r.Method, p)
		}
	}
	state, _ := json.Marshal(ir.RequestState)
	k, _ := json.Marshal(key)
	if _, text = call(`,"inputResponses":{` + string(k) + `:{"action":"accept"}},"requestState":` + string(state)); !strings.Contains(text, "completed the URL elicitation") {
		t.Errorf("retry: %s", text)
	}
}
