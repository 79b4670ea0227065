package modern

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
)

// FuzzPlainID: an id the fast path echoes raw must be one the SDK path
// echoes identically (it decodes ids to float64 or string and re-encodes
// them without HTML escaping).
func FuzzPlainID(f *testing.F) {
	for _, s := range []string{`1`, `-7`, `0`, `-0`, `123456789012345`, `1e3`, `1.0`, `"a"`, `"a\"b"`, `"<&>"`, `"\u00e9"`, `"é"`, `""`, `null`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, id []byte) {
		if !plainID(id) {
			return
		}
		var v any
		if err := json.Unmarshal(id, &v); err != nil {
			t.Fatalf("plainID(%s) but it does not decode: %v", id, err)
		}
		var out []byte
		switch v := v.(type) {
		case float64:
			out = strconv.AppendInt(nil, int64(v), 10)
		case string:
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(v)
			out = bytes.TrimRight(buf.Bytes(), "\n")
		default:
			t.Fatalf("plainID(%s): a %T", id, v)
		}
		if !bytes.Equal(out, id) {
			t.Fatalf("plainID(%s), but the SDK echoes %s", id, out)
		}
	})
}

// The capability cache is bounded in entries and in the size of what it keeps.
func TestCapsCacheBounded(t *testing.T) {
	var c capsCache
	big := []byte(`{"experimental":{"x":"` + strings.Repeat("a", maxCapsKey) + `"}}`)
	if e := c.get(big, nil); e == nil || len(c.m) != 0 {
		t.Fatalf("a %d-byte set: entry %v, cached %d", len(big), e, len(c.m))
	}
	for i := range 3 * maxCapsCache {
		caps := []byte(`{"experimental":{"n":` + strconv.Itoa(i) + `}}`)
		if c.get(caps, nil) == nil {
			t.Fatalf("valid set %s refused", caps)
		}
		if len(c.m) > maxCapsCache {
			t.Fatalf("%d entries cached", len(c.m))
		}
	}
	e := c.get([]byte(`{"roots":{"listChanged":true}}`), []byte(`{"name":"c","version":"1"}`))
	if e == nil || !e.inputs || e.v1.RootsV2 == nil || !e.v1.Roots.ListChanged || e != c.get([]byte(`{"roots":{"listChanged":true}}`), []byte(`{"name":"c","version":"1"}`)) {
		t.Fatalf("roots entry %+v", e)
	}
	for _, bad := range []struct{ caps, info string }{{`null`, ``}, {`"x"`, ``}, {`{"roots":5}`, ``}, {`{}`, `null`}, {`{}`, `{"name":1}`}, {``, ``}} {
		if c.get([]byte(bad.caps), []byte(bad.info)) != nil {
			t.Errorf("accepted caps %s info %s", bad.caps, bad.info)
		}
	}
}

// FuzzModernRequest: a _meta the fast path accepts is one the SDK accepts
// too (it reads _meta with encoding/json into a map: exact member names,
// the last of duplicates), with the same protocol version and capabilities.
func FuzzModernRequest(f *testing.F) {
	for _, s := range []string{
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}},"io.modelcontextprotocol/clientInfo":{"name":"x","version":"1"}}`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}`,
		`{"IO.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientCapabilities":null}`,
	} {
		f.Add([]byte(s))
	}
	s := &Handler{}
	f.Fuzz(func(t *testing.T, meta []byte) {
		// meta is a member of a decoded params object: valid JSON.
		if !json.Valid(meta) {
			return
		}
		if _, ok := s.capsCache.request(callpath.Caller{}, meta); !ok {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(meta, &m); err != nil {
			t.Fatalf("accepted %s, which encoding/json refuses: %v", meta, err)
		}
		var v string
		if json.Unmarshal(m["io.modelcontextprotocol/protocolVersion"], &v) != nil || v != modernVersion {
			t.Fatalf("accepted %s, whose version the SDK reads as %q", meta, v)
		}
		caps := bytes.TrimSpace(m["io.modelcontextprotocol/clientCapabilities"])
		if len(caps) == 0 || caps[0] != '{' {
			t.Fatalf("accepted %s, whose capabilities the SDK reads as %s", meta, caps)
		}
	})
}
