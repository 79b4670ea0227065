package wire

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// sdkError is the error response go-sdk writes for id, code, msg and data.
func sdkError(t *testing.T, id int64, code int64, msg string, data json.RawMessage) []byte {
	t.Helper()
	rid, err := jsonrpc.MakeID(float64(id))
	if err != nil {
		t.Fatal(err)
	}
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: rid, Error: &jsonrpc.Error{Code: code, Message: msg, Data: data}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAppendErrorAsSDK(t *testing.T) {
	for _, c := range []struct {
		msg  string
		data json.RawMessage
	}{
		{`unknown tool "x"`, nil},
		{"<script>&amp;</script>", json.RawMessage(`{"html":"<a&b>"}`)},
		{"ctl \x00\x01\b\f\n\r\t\x1f \u2028\u2029 bad \xff utf-8 é", nil},
	} {
		got := AppendError(nil, json.RawMessage(`7`), -32602, c.msg, c.data)
		if want := sdkError(t, 7, -32602, c.msg, c.data); !bytes.Equal(got, want) {
			t.Errorf("AppendError:\n got %s\nwant %s", got, want)
		}
	}
}

// FuzzAppendError: an error response carries whatever text an upstream or
// a Go error holds; it is always valid JSON and byte for byte what go-sdk
// writes.
func FuzzAppendError(f *testing.F) {
	f.Add(int64(1), int64(-32603), "internal error", []byte(nil))
	f.Add(int64(-5), int64(0), "<\u2028&\xff\x00\"\\", []byte(`{"a":"<b>"}`))
	f.Fuzz(func(t *testing.T, id, code int64, msg string, data []byte) {
		var c bytes.Buffer
		if len(data) > 0 && (json.Compact(&c, data) != nil || !bytes.Equal(c.Bytes(), data)) {
			data = nil // go-sdk compacts data; mcp-mux passes it through as it came
		}
		if id > 1<<53 || id < -(1<<53) {
			id %= 1 << 53 // float64-exact, as MakeID takes it
		}
		got := AppendError(nil, json.RawMessage(json.Number(jsonNum(id))), code, msg, data)
		if !json.Valid(got) {
			t.Fatalf("invalid JSON: %s", got)
		}
		if want := sdkError(t, id, code, msg, data); !bytes.Equal(got, want) {
			t.Fatalf("AppendError:\n got %s\nwant %s", got, want)
		}
	})
}

func jsonNum(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestLeaf pins wire as a leaf: config imports it, so it imports neither
// net/http nor go-sdk (mcpwire holds what needs them).
func TestLeaf(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "net/http" || strings.HasPrefix(dep, "github.com/modelcontextprotocol/") ||
			strings.HasPrefix(dep, "github.com/mcp-mux/mcp-mux/") && dep != "github.com/mcp-mux/mcp-mux/internal/wire" {
			t.Errorf("wire imports %s", dep)
		}
	}
}
