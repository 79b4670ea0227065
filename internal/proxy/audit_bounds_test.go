package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// bigName is a fresh n-byte name (a new allocation, as each decoded
// request's is).
func bigName(prefix string, i, n int) string {
	return fmt.Sprintf("%s%04d", prefix, i) + string(bytes.Repeat([]byte{'z'}, n))
}

// recordLines reads the JSON lines of the audit files given (missing ones
// are empty).
func recordLines(t *testing.T, paths ...string) []string {
	t.Helper()
	var out []string
	for _, p := range paths {
		f, err := os.Open(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			out = append(out, sc.Text())
		}
		_ = f.Close()
		if sc.Err() != nil {
			t.Fatalf("reading %s: %v", p, sc.Err())
		}
	}
	return out
}

// Issue 32, attack 2: calls with oversized unknown names (tools, prompts,
// resource URIs) cannot rotate the earlier records out of the file pair:
// each record stays within audit.MaxRecordBytes, so the trail of the
// calls made before is still there.
func TestAuditTrailSurvivesOversizedNames(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := audit.New(audit.Options{Enabled: true, Output: path, MaxFileBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, up.URL+"/mcp"), proxy.Options{Audit: a})
	cs := connect(t, m.ts.URL, nil)
	ctx := context.Background()
	for i := range 3 {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "web_echo", Arguments: map[string]any{"text": fmt.Sprintf("before-%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	const n, size = 12, 256 << 10 // 9 MB of names through a 2 MiB file pair
	for i := range n {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: bigName("t", i, size)}); err == nil {
			t.Fatal("an unknown tool was called")
		}
		if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: bigName("p", i, size)}); err == nil {
			t.Fatal("an unknown prompt was got")
		}
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: bigName("test://r", i, size)}); err == nil {
			t.Fatal("an unknown resource was read")
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	lines := recordLines(t, path+".1", path)
	var echoes, attack, longest int
	for _, l := range lines {
		longest = max(longest, len(l))
		var r audit.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("not a record: %.200q", l)
		}
		if r.Tool == "web_echo" && r.Outcome == audit.OK {
			echoes++
		}
		if strings.HasSuffix(r.Tool+r.Prompt+r.URI, fmt.Sprintf("(%d bytes)", size+5)) || strings.HasSuffix(r.URI, fmt.Sprintf("(%d bytes)", size+12)) {
			attack++
		}
	}
	t.Logf("%d records in the file pair, the longest %d bytes; %d of the 3 earlier calls, %d of the %d oversized ones (clipped)", len(lines), longest, echoes, attack, 3*n)
	if echoes != 3 {
		t.Errorf("the records of the 3 calls made before the oversized ones: %d left in the file pair", echoes)
	}
	if longest > audit.MaxRecordBytes {
		t.Errorf("a record of %d bytes; the bound is %d", longest, audit.MaxRecordBytes)
	}
}

// Issue 32, attack 2: with an output nobody reads (stdout piped to a
// process that never reads it) the records of calls with oversized
// resource URIs wait in the audit queue; the queue keeps what its bound
// allows, so the mux's heap stays put.
func TestAuditBlockedOutputHoldsLittle(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	path := filepath.Join(t.TempDir(), "stuck")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	reader, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := audit.New(audit.Options{Enabled: true, Output: path})
	if err != nil {
		t.Fatal(err)
	}
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, up.URL+"/mcp"), proxy.Options{Audit: a})
	cs := connect(t, m.ts.URL, nil)
	before := liveHeap()
	for i := range 60 {
		if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: bigName("test://r", i, 256<<10)}); err == nil {
			t.Fatal("an unknown resource was read")
		}
	}
	grown := int64(liveHeap()) - int64(before)
	t.Logf("60 reads of 256 KB unknown URIs, audit output not read: heap %+d KiB", grown>>10)
	if grown > 6<<20 {
		t.Errorf("the heap grew %d MiB holding records nobody reads (bound 6 MiB)", grown>>20)
	}
	done := make(chan struct{})
	go func() { // unblock the writer so the auditor can close
		defer close(done)
		_, _ = io.Copy(io.Discard, reader)
		_ = reader.Close()
	}()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	<-done
}

// liveHeap is the live heap after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Issue 32, weak findings: a credentials denial names the caller's id to
// the caller, but its audit record does not (the record's caller is
// hashed), and the hash is keyed: hashing a guessed id (a dictionary)
// does not find it.
func TestAuditCallerNeverPlain(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	const (
		user   = "alice-the-user"
		apiKey = "api-key-audit-hash-0123456789"
	)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := audit.New(audit.Options{Enabled: true, Output: path})
	if err != nil {
		t.Fatal(err)
	}
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q, "user_auth": {"users": {"bob": "Bearer for-bob-only"}}}},
		"inbound": {"auth": {"mode": "api_keys", "keys": {%q: %q}}}}`, up.URL+"/mcp", user, apiKey), proxy.Options{Audit: a})
	c := mcp.NewClient(&mcp.Implementation{Name: "audit-hash", Version: "1"}, nil)
	hc := &http.Client{Transport: headerRT{"Authorization": "Bearer " + apiKey}}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: m.ts.URL + "/mcp", HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_echo", Arguments: map[string]any{"text": "x"}})
	if err != nil || !res.IsError || !strings.Contains(fmt.Sprint(res.Content[0]), user) {
		t.Fatalf("the call was not denied for want of the caller's credential (so the test proves nothing): %v %+v", err, res)
	}
	recs, raw := auditRecords(t, a, path)
	if len(recs) != 1 || recs[0].Outcome != audit.Denied || !strings.HasPrefix(recs[0].Denial, "credentials: ") {
		t.Fatalf("records = %+v", recs)
	}
	if strings.Contains(raw, user) {
		t.Errorf("the plain user id is in the record:\n%s", raw)
	}
	sum := sha256.Sum256([]byte(user))
	if unkeyed := "sha256:" + hex.EncodeToString(sum[:12]); recs[0].Caller == "" || strings.Contains(raw, hex.EncodeToString(sum[:12])) {
		t.Errorf("the caller is %q: hashing the guess %q gives %q", recs[0].Caller, user, unkeyed)
	}
}
