package proxy_test

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// maxCallFiles bounds the product files a tools/call reads from the /mcp
// handler to the upstream request (issue 33); ARCHITECTURE.md lists them.
const maxCallFiles = 12

// stackTransport records, for each upstream tools/call request, the
// product files on the stack that sent it.
type stackTransport struct {
	mu    sync.Mutex
	files [][]string
}

func (s *stackTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			s.mu.Lock()
			s.files = append(s.files, callFiles())
			s.mu.Unlock()
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// callFiles are the module's non-test files on the calling stack, from the
// /mcp handler (mcpHandler: the route every era and path takes after the
// server's shared guards) down, in order of first appearance.
func callFiles() []string {
	pcs := make([]uintptr, 128)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	var stack []runtime.Frame
	for {
		f, more := frames.Next()
		stack = append(stack, f)
		if !more {
			break
		}
	}
	var files []string
	from := false
	for i := len(stack) - 1; i >= 0; i-- { // outermost first
		f := stack[i]
		if strings.Contains(f.Function, "mcpHandler") {
			from = true
		}
		rel, ok := productFile(f.File)
		if from && ok && !slices.Contains(files, rel) {
			files = append(files, rel)
		}
	}
	return files
}

// productFile is file relative to the module root when it is product code.
func productFile(file string) (string, bool) {
	i := strings.LastIndex(file, "/internal/")
	if i < 0 || strings.HasSuffix(file, "_test.go") || strings.Contains(file, "/go/pkg/mod/") {
		return "", false
	}
	rel := filepath.ToSlash(file[i+1:])
	for _, support := range []string{"internal/mcptest/", "internal/otlptest/"} {
		if strings.HasPrefix(rel, support) {
			return "", false
		}
	}
	return rel, true
}

// TestCallPathFiles: a tools/call of an HTTP upstream, with telemetry off
// and no limits, reads at most maxCallFiles product files from the /mcp
// handler to the upstream request in each era, on its fast path.
func TestCallPathFiles(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("alpha"))
	tr := &stackTransport{}
	m := startMux(t, `{"mcpServers": {"alpha": {"type": "http", "url": "`+up.URL+`/mcp"}}}`, proxy.Options{UpstreamTransport: tr})
	url := m.ts.URL + "/mcp"
	status, h, body := rawRequest(t, http.MethodPost, url, nil, initializeBody)
	sid := h.Get("Mcp-Session-Id")
	if status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: HTTP %d %s", status, body)
	}
	legacy := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	rawRequest(t, http.MethodPost, url, legacy, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, c := range []struct {
		era  string
		hdr  map[string]string
		body string
	}{
		{"2025-11-25", legacy, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"alpha_echo","arguments":{"text":"hi"}}}`},
		{"2026-07-28", modernHeaders("tools/call", "alpha_echo"),
			`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{` + modernMeta(`{}`) + `,"name":"alpha_echo","arguments":{"text":"hi"}}}`},
	} {
		tr.mu.Lock()
		tr.files = nil
		tr.mu.Unlock()
		if status, _, body := rawRequest(t, http.MethodPost, url, c.hdr, c.body); status != http.StatusOK || !strings.Contains(body, `"hi"`) {
			t.Fatalf("%s: HTTP %d %s", c.era, status, body)
		}
		tr.mu.Lock()
		got := tr.files
		tr.mu.Unlock()
		if len(got) != 1 {
			t.Fatalf("%s: %d upstream tools/call requests, want 1", c.era, len(got))
		}
		files := got[0]
		t.Logf("%s: %d files: %s", c.era, len(files), strings.Join(files, " → "))
		if len(files) == 0 || files[0] != "internal/proxy/fastpath.go" {
			t.Fatalf("%s: the stack does not start at the /mcp handler: %v", c.era, files)
		}
		if len(files) > maxCallFiles {
			t.Errorf("%s: a tools/call reads %d files, more than %d: %v", c.era, len(files), maxCallFiles, files)
		}
	}
}

// catalogLookup matches a lookup of a tool in a catalog view (not a
// session table's Lookup).
var catalogLookup = regexp.MustCompile(`(View|\)|cat)\.Lookup\(`)

// TestOneLookupOneParse: the secrets carrier is parsed in one place
// (authenticate: the Caller carries it from there), and a tool is looked
// up where this list says — on each fast path once, by the pipeline's
// route step or by the edge that hands its route to it. A new lookup or
// parse anywhere else on the call path fails here.
func TestOneLookupOneParse(t *testing.T) {
	allowed := map[string]map[string]int{
		"ParseSecrets(": {"auth.go": 1},
		"catalog lookup": { // View.Lookup, cat.Lookup, <view>).Lookup: a tool's route
			"callpath/pipeline.go": 1, // the route step: the call's lookup
			"modern/fastpath.go":   1, // the 2026-07-28 fast path's, handed to the pipeline with its runtime
			"modern/modern.go":     1, // the 2026-07-28 SDK path's Mcp-Param check, before go-sdk decodes
			"modern/mrtr.go":       1, // a parked call's retry: which call it names
		},
		`.Label("tools/call"`: { // the SDK path's span and metrics, with telemetry on
			"middleware.go": 1,
		},
	}
	got := map[string]map[string]int{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for needle := range allowed {
			n := strings.Count(string(src), needle)
			if needle == "catalog lookup" {
				n = len(catalogLookup.FindAllIndex(src, -1))
			}
			if n > 0 {
				if got[needle] == nil {
					got[needle] = map[string]int{}
				}
				got[needle][filepath.ToSlash(path)] = n
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for needle, want := range allowed {
		if !maps.Equal(got[needle], want) {
			t.Errorf("%s found at %v, want exactly %v", needle, got[needle], want)
		}
	}
}
