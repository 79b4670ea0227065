package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func nested(open, close string, n int, inner string) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

func TestScanDepth(t *testing.T) {
	env := func(params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + params + `}`
	}
	cases := []struct {
		name string
		in   string
		deep bool
	}{
		// The envelope is level 1, so params may nest MaxDepth-1 levels.
		{"at the limit", env(nested("[", "]", MaxDepth-1, "")), false},
		{"one past", env(nested("[", "]", MaxDepth, "")), true},
		{"objects", env(nested(`{"a":`, "}", MaxDepth, "1")), true},
		{"two million arrays", env(nested("[", "]", 2_000_000, "")), true},
		{"unclosed", env(strings.Repeat("[", MaxDepth+1)), true},
		// Brackets inside strings do not count, escaped quotes do not end them.
		{"brackets in a string", env(`"` + strings.Repeat("[", 5000) + `"`), false},
		{"escaped quote", env(`"\"` + strings.Repeat("[", 5000) + `"`), false},
		{"escaped backslash ends the string", env(`["\\"` + nested("[", "]", MaxDepth, "") + `]`), true},
		{"real schema", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","properties":{"b":{"anyOf":[{"type":"string"},{"type":"null"}]}}}}}}`, false},
	}
	for _, c := range cases {
		_, err := Scan([]byte(c.in))
		if c.deep != errors.Is(err, ErrTooDeep) {
			t.Errorf("%s: Scan = %v, want deep=%v", c.name, err, c.deep)
		}
		var m Message
		if err := Decode([]byte(c.in), &m); c.deep != errors.Is(err, ErrTooDeep) {
			t.Errorf("%s: Decode = %v, want deep=%v", c.name, err, c.deep)
		}
		// encoding/json agrees on what is JSON at all.
		if !c.deep && strings.HasSuffix(c.in, "}") && !json.Valid([]byte(c.in)) {
			t.Errorf("%s: test input is not JSON", c.name)
		}
	}
}

func TestScanBatch(t *testing.T) {
	cases := []struct {
		in    string
		batch bool
		n     int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, false, 0},
		{`[]`, true, 0},
		{` [ ] `, true, 0},
		{`[{"a":[1,2,3]}]`, true, 1},
		{`[{"a":"x,y"},{"b":2} , 3,"s",null]`, true, 5},
		{`[[1,2],[3]]`, true, 2},
	}
	for _, c := range cases {
		sh, err := Scan([]byte(c.in))
		if err != nil || sh.Batch != c.batch || sh.Len != c.n {
			t.Errorf("Scan(%s) = %+v, %v; want batch=%v len=%d", c.in, sh, err, c.batch, c.n)
		}
	}
}

func TestTopLevelID(t *testing.T) {
	cases := map[string]string{
		`{"jsonrpc":"2.0","id":"mux-7","result":` + nested("[", "]", 5000, "") + `}`: `"mux-7"`,
		`{"result":` + nested(`{"id":`, "}", 50, "1") + `,"id":42}`:                  `42`,
		`{"jsonrpc":"2.0","method":"x","params":{"id":3}}`:                           ``,
		`{"a":"id","id" : "q\"x" }`:                                                  `"q\"x"`,
		`{"id":{"x":1}}`:                                                             ``,
		`{"id":tru}`:                                                                 ``,
		`[{"id":1}]`:                                                                 ``,
		`{"id":null}`:                                                                `null`,
	}
	for in, want := range cases {
		if got := string(TopLevelID([]byte(in))); got != want {
			t.Errorf("TopLevelID(%.60s) = %q, want %q", in, got, want)
		}
	}
}

func TestScanAllocates(t *testing.T) {
	b := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"s":"a\"b","n":[1,2,{"k":null}]}}}`)
	if n := testing.AllocsPerRun(100, func() { _, _ = Scan(b) }); n != 0 {
		t.Errorf("Scan allocates %v times", n)
	}
}

func BenchmarkScan(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"web_search","arguments":{"query":"` + strings.Repeat("lorem ipsum ", 300) + `","limit":10,"filters":{"lang":["en","de"],"site":null}}}}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		_, _ = Scan(body)
	}
}

func TestBuffersDropLarge(t *testing.T) {
	var b Buffers
	big := make([]byte, 0, MaxPooled+1)
	b.Put(&big)
	small := b.Get()
	if cap(*small) > MaxPooled {
		t.Fatalf("the pool kept a %d-byte buffer", cap(*small))
	}
	*small = append(*small, "x"...)
	b.Put(small)
	if got := b.Get(); len(*got) != 0 {
		t.Fatalf("Get returned a non-empty buffer %q", *got)
	}
}

func TestKeysHavePrefix(t *testing.T) {
	const p = "io.modelcontextprotocol/"
	for in, want := range map[string]bool{
		`{}`: true,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}`: true,
		` {"io.modelcontextprotocol/a":["x","y"], "io.modelcontextprotocol/b":{"c":1,"d":"e"}} `:                             true,
		`{"io.modelcontextprotocol/a":1,"progressToken":"t"}`:                                                                false,
		`{"io.modelcontextprotocol/a":{"progressToken":1},"b":2}`:                                                            false,
		`{"io.modelcontextprotocol/a":"\"b\":1"}`:                                                                            true,
		`{"io.modelcontextprotocol\/a":1}`:                                                                                   false, // escaped: not taken on trust
		`{"io.modelcontextprotocol/\u0061":1}`:                                                                               false,
		`[]`:                                                                                                                 false, `null`: false, `{`: false, `{"io.modelcontextprotocol/a":1`: false, ``: false,
	} {
		if got := KeysHavePrefix([]byte(in), p); got != want {
			t.Errorf("KeysHavePrefix(%s) = %v, want %v", in, got, want)
		}
	}
}

// FuzzKeysHavePrefix: a request's _meta is untrusted. A true answer must
// mean that every member name, decoded, has the prefix.
func FuzzKeysHavePrefix(f *testing.F) {
	for _, s := range []string{`{}`, `{"p/a":1,"p/b":{"x":[1,"]"]}}`, `{"p/a":1,"q":2}`, `{"p\/a":1}`, `{"p/a":"\"q\":1"}`, `{"p/`, `[{"q":1}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !KeysHavePrefix(data, "p/") || !json.Valid(data) {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("KeysHavePrefix accepted %q, which is not an object: %v", data, err)
		}
		for k := range m {
			if !strings.HasPrefix(k, "p/") {
				t.Fatalf("KeysHavePrefix accepted %q with member %q", data, k)
			}
		}
	})
}

// FuzzTopLevelID: an upstream line or client body never crashes the id
// scan, and on a valid object it finds the id encoding/json finds.
func FuzzTopLevelID(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":7,"result":{}}`, `{"a":{"id":1},"id":"x"}`, `{"id":null}`, `{"a":"\"id\"","id":-1.5e3}`, `{"id"`, `[{"id":1}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := TopLevelID(data)
		var m map[string]json.RawMessage
		if bytes.Count(data, []byte(`"id"`)) != 1 || json.Unmarshal(data, &m) != nil || m["id"] == nil {
			return
		}
		want := bytes.TrimSpace(m["id"])
		if c := want[0]; c == '{' || c == '[' || c == 't' || c == 'f' {
			return // not an id TopLevelID reads
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("TopLevelID(%s) = %s, encoding/json finds %s", data, got, want)
		}
	})
}

func TestTooDeepAt(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  int
	}{
		{`{}`, 1, -1},
		{`{"a":[]}`, 1, 5},
		{`{"a":"[[[["}`, 1, -1},
		{`{"a":"\"[[["}`, 1, -1},
		{`[[],[],[[]]]`, 2, 8},
		{`[[`, 2, -1},
		{`"unterminated [[[`, 0, -1},
	} {
		if got := TooDeepAt([]byte(tc.in), tc.limit); got != tc.want {
			t.Errorf("TooDeepAt(%s, %d) = %d, want %d", tc.in, tc.limit, got, tc.want)
		}
	}
}
