package modernreq

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/upstream/paramheader"
)

// Params adds the _meta triple in front of the params, or merges it into a
// _meta the params carry (keeping their own keys but the protocol's).
func TestParams(t *testing.T) {
	r := New(`{"sampling":{}}`, nil)
	for _, tc := range []struct{ in, want string }{
		{``, `{"_meta":{` + string(r.meta) + `}}`},
		{`{}`, `{"_meta":{` + string(r.meta) + `}}`},
		{` {"name":"x"} `, `{"_meta":{` + string(r.meta) + `},"name":"x"}`},
	} {
		if got := string(r.Params([]byte(tc.in))); got != tc.want {
			t.Errorf("Params(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	out := r.Params([]byte(`{"_meta":{"progressToken":"t","io.modelcontextprotocol/logLevel":"error"}}`))
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	if string(p.Meta["progressToken"]) != `"t"` || string(p.Meta["io.modelcontextprotocol/logLevel"]) != `"debug"` ||
		string(p.Meta["io.modelcontextprotocol/protocolVersion"]) != `"`+Version+`"` {
		t.Errorf("merged _meta = %s", out)
	}
}

// Headers names the method and the request's target, and writes a
// tools/call's Mcp-Param-* headers from the annotations.
func TestHeaders(t *testing.T) {
	var ix paramheader.Index
	ix.Add("t", json.RawMessage(`{"inputSchema":{"properties":{"r":{"type":"string","x-mcp-header":"Region"}}}}`))
	var ann atomic.Pointer[paramheader.Index]
	ann.Store(&ix)
	r := New("", &ann)
	for _, tc := range []struct {
		method, params string
		want           http.Header
	}{
		{"tools/call", `{"name":"t","arguments":{"r":"eu"}}`, http.Header{"Mcp-Method": {"tools/call"}, "Mcp-Name": {"t"}, "Mcp-Param-Region": {"eu"}}},
		{"resources/read", `{"uri":"file:///a"}`, http.Header{"Mcp-Method": {"resources/read"}, "Mcp-Name": {"file:///a"}}},
		{"tools/list", `{}`, http.Header{"Mcp-Method": {"tools/list"}}},
	} {
		h := http.Header{}
		if err := r.Headers(h, tc.method, []byte(tc.params)); err != nil {
			t.Fatal(err)
		}
		if len(h) != len(tc.want) {
			t.Errorf("%s: headers %v, want %v", tc.method, h, tc.want)
		}
		for k, v := range tc.want {
			if strings.Join(h[k], ",") != strings.Join(v, ",") {
				t.Errorf("%s: %s = %q, want %q", tc.method, k, h[k], v)
			}
		}
	}
}
