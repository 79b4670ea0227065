package paramheader

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

func TestEncodeParamValue(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		ok        bool
	}{
		{`"eu-west-1"`, "eu-west-1", true},
		{`""`, "", true},
		{`"München"`, "=?base64?TcO8bmNoZW4=?=", true},
		{`" lead"`, "=?base64?IGxlYWQ=?=", true},
		{`"trail\t"`, "=?base64?dHJhaWwJ?=", true},
		{`"a\r\nX-Evil: 1"`, "=?base64?YQ0KWC1FdmlsOiAx?=", true},
		{`"=?base64?abc?="`, "=?base64?PT9iYXNlNjQ/YWJjPz0=?=", true},
		{`"in the middle ok"`, "in the middle ok", true},
		{`true`, "true", true},
		{`false`, "false", true},
		{`42`, "42", true},
		{`-7`, "-7", true},
		{`1e3`, "1000", true},
		{`9007199254740991`, "9007199254740991", true},
		{`9007199254740993`, "", false},
		{`1.5`, "", false},
		{`null`, "", false},
		{`{"a":1}`, "", false},
		{`[1]`, "", false},
	} {
		got, ok := encodeParamValue(json.RawMessage(tc.raw))
		if got != tc.want || ok != tc.ok {
			t.Errorf("encodeParamValue(%s) = %q, %v; want %q, %v", tc.raw, got, ok, tc.want, tc.ok)
		}
	}
}

// testTool is a listed tool: its raw name and its JSON.
type testTool struct {
	Name string
	Raw  json.RawMessage
}

// buildIndex indexes tools as upstream's discovery does, and lists the
// tools whose annotations are invalid.
func buildIndex(tools []testTool) (Index, []string) {
	var ix Index
	var invalid []string
	for _, t := range tools {
		if !ix.Add(t.Name, t.Raw) {
			invalid = append(invalid, t.Name)
		}
	}
	return ix, invalid
}

func TestParamIndex(t *testing.T) {
	tool := func(name, props string) testTool {
		return testTool{Name: name, Raw: json.RawMessage(`{"name":"` + name + `","inputSchema":{"type":"object","properties":` + props + `}}`)}
	}
	ix, invalid := buildIndex([]testTool{
		tool("ok", `{"a":{"type":"string","x-mcp-header":"a-b"},"n":{"type":"object","properties":{"c":{"type":"integer","x-mcp-header":"C"}}}}`),
		tool("none", `{"a":{"type":"string"}}`),
		tool("object", `{"a":{"type":"object","x-mcp-header":"A"}}`),
		tool("number", `{"a":{"type":"number","x-mcp-header":"A"}}`),
		tool("badname", `{"a":{"type":"string","x-mcp-header":"a b"}}`),
		tool("crlf", `{"a":{"type":"string","x-mcp-header":"A\r\nX"}}`),
		tool("dup", `{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"x"}}`),
		tool("deep-plain", strings.Repeat(`{"a":{"type":"object","properties":`, 9)+`{"z":{"type":"string"}}`+strings.Repeat(`}}`, 9)),
		tool("deep", strings.Repeat(`{"a":{"type":"object","properties":`, 9)+`{"z":{"type":"string","x-mcp-header":"Z"}}`+strings.Repeat(`}}`, 9)),
	})
	if len(ix["ok"]) != 2 || ix["none"] != nil {
		t.Fatalf("index = %+v", ix)
	}
	if want := "object number badname crlf dup deep"; strings.Join(invalid, " ") != want {
		t.Errorf("invalid = %q, want %q", invalid, want)
	}
	h := http.Header{}
	if err := ix["ok"].Set(h, json.RawMessage(`{"a":"x","n":{"c":3}}`)); err != nil {
		t.Fatal(err)
	}
	if h.Get("Mcp-Param-A-B") != "x" || h.Get("Mcp-Param-C") != "3" {
		t.Errorf("headers = %v", h)
	}
	// A header the caller sent is kept.
	h = http.Header{"Mcp-Param-A-B": {"mine"}}
	_ = ix["ok"].Set(h, json.RawMessage(`{"a":"x"}`))
	if h.Get("Mcp-Param-A-B") != "mine" || len(h) != 1 {
		t.Errorf("headers = %v", h)
	}
	// Too large a value is refused, not sent.
	big := strings.Repeat("x", maxParamValue+1)
	err := ix["ok"].Set(http.Header{}, json.RawMessage(`{"a":"`+big+`"}`))
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != -32602 || strings.Contains(err.Error(), "xxxx") {
		t.Errorf("oversized value: %v", err)
	}
}

// The encoder never yields a header value that is unsafe to send, and the
// encoded form decodes to the argument.
func FuzzEncodeParamString(f *testing.F) {
	for _, s := range []string{"", "plain", "München", " x", "x\t", "a\r\nb", "=?base64?QQ==?=", "\x00", "\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := encodeParamString(s)
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 || v[i] > 0x7e {
				t.Fatalf("encoded %q has byte %#x", s, v[i])
			}
		}
		if v != "" && (v[0] == ' ' || v[len(v)-1] == ' ' || v[0] == '\t' || v[len(v)-1] == '\t') {
			t.Fatalf("encoded %q = %q has surrounding space", s, v)
		}
		if inner, ok := strings.CutPrefix(v, base64Prefix); ok && strings.HasSuffix(inner, base64Suffix) {
			b, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(inner, base64Suffix))
			if err != nil || string(b) != s {
				t.Fatalf("encoded %q = %q does not decode back (%v)", s, v, err)
			}
		} else if v != s {
			t.Fatalf("plain %q sent as %q", s, v)
		}
	})
}

// Hostile schemas and arguments never panic and never produce an invalid
// header.
func FuzzParamHeaders(f *testing.F) {
	f.Add(`{"a":{"type":"string","x-mcp-header":"A"}}`, `{"a":"x"}`)
	f.Add(`{"a":{"type":"object","properties":{"b":{"type":"boolean","x-mcp-header":"B"}}}}`, `{"a":{"b":true}}`)
	f.Fuzz(func(t *testing.T, props, args string) {
		ix, _ := buildIndex([]testTool{{Name: "t", Raw: json.RawMessage(`{"inputSchema":{"properties":` + props + `}}`)}})
		h := http.Header{}
		if ix["t"].Set(h, json.RawMessage(args)) != nil {
			return
		}
		for k, vs := range h {
			if !strings.HasPrefix(k, paramHeaderPrefix) || !validParamName(strings.TrimPrefix(k, paramHeaderPrefix)) {
				t.Fatalf("header name %q", k)
			}
			for _, v := range vs {
				if strings.ContainsAny(v, "\r\n\x00") || len(v) > maxParamValue {
					t.Fatalf("header %s value %q", k, v)
				}
			}
		}
	})
}

// BenchmarkSetParamHeaders measures writing three Mcp-Param headers for one
// call's arguments (one value base64-encoded, one 2 KB argument not
// annotated).
func BenchmarkSetParamHeaders(b *testing.B) {
	ix, _ := buildIndex([]testTool{{Name: "t", Raw: json.RawMessage(`{"inputSchema":{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},"count":{"type":"integer","x-mcp-header":"Count"},
		"city":{"type":"string","x-mcp-header":"City"},"body":{"type":"string"}}}}`)}})
	args := json.RawMessage(`{"region":"eu-west-1","count":3,"city":"München","body":"` + strings.Repeat("x", 2000) + `"}`)
	b.ReportAllocs()
	for b.Loop() {
		h := make(http.Header, 8)
		if err := ix["t"].Set(h, args); err != nil || len(h) != 3 {
			b.Fatal(err, h)
		}
	}
}

func TestParamHeadersCheck(t *testing.T) {
	p := ForTool(json.RawMessage(`{"name":"t","inputSchema":{"type":"object","properties":{
		"r":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"},
		"b":{"type":"boolean","x-mcp-header":"B"},"o":{"type":"object","properties":{"t":{"type":"string","x-mcp-header":"T"}}}}}}`))
	args := json.RawMessage(`{"r":"München","n":7,"b":true,"o":{"t":"acme"}}`)
	for _, tc := range []struct {
		h    http.Header
		args json.RawMessage
		bad  string // the header the error names; "" for none
	}{
		{http.Header{}, args, ""},
		{http.Header{"Mcp-Param-Region": {"=?base64?TcO8bmNoZW4=?="}, "Mcp-Param-N": {"7"}, "Mcp-Param-B": {"true"}, "Mcp-Param-T": {"acme"}}, args, ""},
		{http.Header{"Mcp-Param-N": {"7.0"}}, args, ""},          // compared as numbers, as the SDK does
		{http.Header{"Mcp-Param-Other": {"x"}}, args, ""},        // unannotated: ignored (never forwarded)
		{http.Header{"Mcp-Param-Region": {"München"}}, args, ""}, // not encoded, but the same value
		{http.Header{"Mcp-Param-Region": {"evil"}}, args, "Mcp-Param-Region"},
		{http.Header{"Mcp-Param-Region": {"=?base64?!!?="}}, args, "Mcp-Param-Region"},
		{http.Header{"Mcp-Param-N": {"8"}}, args, "Mcp-Param-N"},
		{http.Header{"Mcp-Param-N": {"NaN"}}, args, "Mcp-Param-N"},
		{http.Header{"Mcp-Param-B": {"True"}}, args, "Mcp-Param-B"},
		{http.Header{"Mcp-Param-T": {"other"}}, args, "Mcp-Param-T"},
		{http.Header{"Mcp-Param-T": {"acme"}}, json.RawMessage(`{"o":null}`), "Mcp-Param-T"},
		{http.Header{"Mcp-Param-Region": {"x"}}, json.RawMessage(`{"r":null}`), "Mcp-Param-Region"},
		{http.Header{"Mcp-Param-Region": {"x"}}, json.RawMessage(`not json`), "Mcp-Param-Region"},
		{http.Header{"Mcp-Param-Region": {"{}"}}, json.RawMessage(`{"r":{}}`), "Mcp-Param-Region"},
	} {
		err := p.Check(tc.h, tc.args)
		var we *wire.Error
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("Check(%v, %s) = %v, want nil", tc.h, tc.args, err)
		case tc.bad != "" && (!errors.As(err, &we) || we.Code != -32020 || !strings.Contains(we.Message, tc.bad)):
			t.Errorf("Check(%v, %s) = %v, want a -32020 naming %s", tc.h, tc.args, err, tc.bad)
		case err != nil && strings.Contains(err.Error(), "evil"):
			t.Errorf("the error echoes the header value: %v", err)
		}
	}
	// A tool whose annotations are invalid has none: nothing is checked.
	if err := ForTool(json.RawMessage(`{"inputSchema":{"properties":{"a":{"type":"object","x-mcp-header":"A"}}}}`)).
		Check(http.Header{"Mcp-Param-A": {"x"}}, json.RawMessage(`{}`)); err != nil {
		t.Errorf("invalid annotations checked: %v", err)
	}
}

// A caller's header and arguments never panic the check, and a value
// mcp-mux would write for an argument always passes it.
func FuzzParamHeadersCheck(f *testing.F) {
	f.Add(`"München"`, "=?base64?TcO8bmNoZW4=?=")
	f.Add(`7`, "7.0")
	f.Add(`true`, "true")
	f.Add(`"=?base64?abc?="`, "=?base64?abc?=")
	f.Add(`{"x":1}`, "=?base64?")
	p := ForTool(json.RawMessage(`{"inputSchema":{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}}`))
	f.Fuzz(func(t *testing.T, arg, header string) {
		args := json.RawMessage(`{"a":` + arg + `}`)
		_ = p.Check(http.Header{"Mcp-Param-A": {header}}, args)
		if v, ok := encodeParamValue(json.RawMessage(arg)); ok && v != "" && json.Valid(args) {
			if err := p.Check(http.Header{"Mcp-Param-A": {v}}, args); err != nil {
				t.Fatalf("the value written for %s (%q) fails the check: %v", arg, v, err)
			}
		}
	})
}
