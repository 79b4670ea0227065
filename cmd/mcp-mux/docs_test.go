package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/doctest"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// docEnv is the environment the docs' config examples are validated in:
// every variable is set, to a value its name says the kind of (a Redis
// URL, an http URL, or a string long enough for a key).
func docEnv(name string) (string, bool) {
	switch {
	case strings.HasSuffix(name, "REDIS_URL"):
		return "redis://127.0.0.1:6379/0", true
	case strings.HasSuffix(name, "_URL"), strings.HasSuffix(name, "_ENDPOINT"):
		return "http://127.0.0.1:9/mcp", true
	case strings.HasPrefix(name, "MCP_MUX_"):
		return "", false // the CLI's own variables: as a user who set none
	}
	return "value-of-" + name + "-0123456789abcdef0123456789abcdef", true
}

// TestDocsConfigExamples: every config example of the README and the docs
// pages (json, jsonc with its comments stripped, yaml; a block marked
// "fragment" or "helm-values" is not one) passes `mcp-mux validate` as
// written: exit 0 and not one warning.
func TestDocsConfigExamples(t *testing.T) {
	pages, err := doctest.Pages()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	n := 0
	for _, p := range pages {
		for _, b := range p.Blocks() {
			if (b.Lang != "json" && b.Lang != "jsonc" && b.Lang != "yaml") || b.Marker == "fragment" || b.Marker == "helm-values" {
				continue
			}
			n++
			body, ext := b.Body, ".json"
			switch b.Lang {
			case "jsonc":
				body = doctest.StripLineComments(body)
			case "yaml":
				ext = ".yaml"
			}
			file := writeFile(t, dir, strings.NewReplacer("/", "-", ".md", "").Replace(b.Page)+"-"+strconv.Itoa(b.Line)+ext, body)
			var stdout, stderr bytes.Buffer
			code := validate([]string{"--data-dir", filepath.Join(dir, "data"), file}, &stdout, &stderr, docEnv)
			if code != 0 || stderr.Len() != 0 {
				t.Errorf("%s is not a valid config as written (mcp-mux validate exit %d):\n%s%s\nMark a deliberate excerpt <!-- fragment: why --> on the line before its fence.", b.Where(), code, stderr.String(), stdout.String())
			}
		}
	}
	if n < 10 {
		t.Fatalf("found %d config examples; the scan is broken", n)
	}
}

// docsURL is the mux address the docs' examples use (the quick start's).
const docsURL = "http://127.0.0.1:8931"

// rpcErrorRE finds a JSON-RPC error object or a tool error in an answer.
var rpcErrorRE = regexp.MustCompile(`"error"\s*:\s*\{|"isError"\s*:\s*true`)

// docsAdminToken is the admin token the curl examples' mux has; the
// scripts get it as $MCP_MUX_ADMIN_TOKEN, as the docs write it.
const docsAdminToken = "docs-admin-token-0123456789abcdef"

// TestDocsCurlExamples: every sh block of the docs that runs curl runs, as
// one script, against a running mcp-mux serving the quick start's demo
// tools with an admin token ($MCP_MUX_ADMIN_TOKEN) and an operator
// approvals rule on demo_add, one call of which is pending approval
// ($APPROVAL_ID): every curl succeeds (HTTP errors fail it:
// --fail-with-body) and no answer is a JSON-RPC or tool error.
func TestDocsCurlExamples(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("no curl in PATH")
	}
	pages, err := doctest.Pages()
	if err != nil {
		t.Fatal(err)
	}
	var blocks []doctest.Block
	for _, p := range pages {
		for _, b := range p.Blocks() {
			if b.Lang == "sh" && strings.Contains(b.Body, "curl ") {
				blocks = append(blocks, b)
			}
		}
	}
	if len(blocks) < 3 {
		t.Fatalf("found %d curl examples in the docs; the scan is broken", len(blocks))
	}
	up := mcptest.ServeHTTP(t, mcptest.NewServer("demo"))
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.json", fmt.Sprintf(`{"mcpServers": {"demo": {"type": "http", "url": %q}},
  "admin": {"token": "$MCP_MUX_ADMIN_TOKEN"},
  "approvals": {"rules": [{"name": "adds", "tool": "demo_add", "approver": "operator", "wait_seconds": 1}]}}`, up.URL+"/mcp"))
	env := []string{"MCP_MUX_ADMIN_TOKEN=" + docsAdminToken}
	s := startServe(t, dir, env, "--config", cfg, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"))
	cs := connect(t, s.url("/mcp"))
	waitTools(t, cs, "demo_echo", "demo_add")
	id := pendingApproval(t, s, cs)
	env = append(env, "APPROVAL_ID="+id)
	for _, b := range blocks {
		if strings.Count(b.Body, "curl ") != strings.Count(b.Body, "curl -sS ") || !strings.Contains(b.Body, docsURL+"/") {
			t.Errorf("%s: every curl of an example is `curl -sS` to %s, so that the test can run it", b.Where(), docsURL)
			continue
		}
		script := "set -e\n" + strings.NewReplacer(docsURL, "http://"+s.addr, "curl -sS ", "curl -sS --fail-with-body ").Replace(b.Body)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, "sh", "-c", script)
		cmd.Env = append(baseEnv(), env...)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil || rpcErrorRE.Match(out) {
			t.Errorf("%s: %v\n%s\noutput:\n%s", b.Where(), err, b.Body, out)
		}
	}
}

// pendingApproval makes one call of demo_add through s wait past its
// rule's wait_seconds and returns the id of the approval it left pending,
// as GET /api/approvals lists it and the call's tool error names it.
func pendingApproval(t *testing.T, s *server, cs *mcp.ClientSession) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo_add", Arguments: map[string]any{"a": 1, "b": 2}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url("/api/approvals"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+docsAdminToken)
	resp, err := newHTTPClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Approvals []struct{ ID, State string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/approvals: %d, %v", resp.StatusCode, err)
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if !res.IsError || len(list.Approvals) != 1 || list.Approvals[0].State != "pending" || !strings.Contains(text, list.Approvals[0].ID) {
		t.Fatalf("a demo_add call past wait_seconds: %q; pending approvals %+v", text, list.Approvals)
	}
	return list.Approvals[0].ID
}
