package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/doctest"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// readmeURL is the mux address the docs' examples use (the quick start's).
const readmeURL = "http://127.0.0.1:8931"

// readmeCurl returns the shell commands of the docs' block marked
// <!-- curl-2026 -->, one per blank-line-separated paragraph of its sh
// fence.
func readmeCurl(t *testing.T) []string {
	t.Helper()
	pages, err := doctest.Pages()
	if err != nil {
		t.Fatal(err)
	}
	var blocks []doctest.Block
	for _, p := range pages {
		for _, b := range p.Blocks() {
			if b.Marker == "curl-2026" {
				blocks = append(blocks, b)
			}
		}
	}
	if len(blocks) != 1 || blocks[0].Lang != "sh" {
		t.Fatalf("want one sh block marked <!-- curl-2026 --> in the docs, found %+v", blocks)
	}
	var cmds []string
	for _, c := range strings.Split(blocks[0].Body, "\n\n") {
		if c = strings.TrimSpace(c); c != "" {
			cmds = append(cmds, c)
		}
	}
	return cmds
}

// runCurl runs one docs command with sh and real curl against base
// instead of the docs' address, and returns the JSON-RPC reply.
func runCurl(t *testing.T, cmd, base string) (string, rpcReply) {
	t.Helper()
	if !strings.Contains(cmd, readmeURL+"/mcp") {
		t.Fatalf("command does not post to %s/mcp:\n%s", readmeURL, cmd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-c", strings.ReplaceAll(cmd, readmeURL, base)).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, cmd, out)
	}
	return string(out), reply(t, string(out))
}

// TestDocsCurl2026: the docs' curl examples of a 2026-07-28
// server/discover and tools/call, run as written with real curl against a
// mux serving the demo server's tool set as "demo", succeed; and each of
// the three things they carry that a legacy request does not is needed
// (issue 19).
func TestDocsCurl2026(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("no curl in PATH")
	}
	up := mcptest.ServeHTTP(t, mcptest.NewServer("demo"))
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"demo": {"type": "http", "url": %q}}}`, up.URL+"/mcp"), proxy.Options{})
	cmds := readmeCurl(t)
	if len(cmds) != 2 {
		t.Fatalf("%d commands in the curl-2026 block, want server/discover and tools/call", len(cmds))
	}
	out, r := runCurl(t, cmds[0], m.ts.URL)
	var disc struct {
		ResultType        string         `json:"resultType"`
		SupportedVersions []string       `json:"supportedVersions"`
		Capabilities      map[string]any `json:"capabilities"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &disc) != nil || disc.ResultType != "complete" ||
		!strings.Contains(strings.Join(disc.SupportedVersions, ","), "2026-07-28") || disc.Capabilities["tools"] == nil {
		t.Errorf("server/discover: %s", out)
	}
	out, r = runCurl(t, cmds[1], m.ts.URL)
	var call struct {
		ResultType string `json:"resultType"`
		IsError    bool   `json:"isError"`
		Content    []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &call) != nil || call.IsError || len(call.Content) != 1 ||
		call.Content[0].Text != "hello from curl" || call.ResultType != "complete" {
		t.Errorf("tools/call: %s", out)
	}

	// Without any one of them the same request is refused.
	for _, drop := range []string{"MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "io.modelcontextprotocol/clientCapabilities"} {
		cmd := cmds[1]
		switch drop {
		case "io.modelcontextprotocol/clientCapabilities":
			cmd = strings.Replace(cmd, `,
          "io.modelcontextprotocol/clientCapabilities": {}`, "", 1)
		default:
			cmd = strings.Replace(cmd, "  -H '"+drop+": ", "  -H 'X-Dropped-"+drop+": ", 1)
		}
		if cmd == cmds[1] {
			t.Fatalf("could not drop %s from:\n%s", drop, cmds[1])
		}
		code := strings.Replace(cmd, "curl -sS ", "curl -sS -o /dev/null -w '%{http_code}' ", 1)
		if got, _ := runCurlRaw(t, code, m.ts.URL); got != "400" {
			t.Errorf("tools/call without %s: HTTP %s, want 400", drop, got)
		}
	}
}

// runCurlRaw runs one command like runCurl and returns its output.
func runCurlRaw(t *testing.T, cmd, base string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-c", strings.ReplaceAll(cmd, readmeURL, base)).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
