package upstream_test

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// TestUICapabilities: a call session declares the MCP Apps extension as
// its client did, in one normal form: only the MIME type the extension
// defines, never another extension.
func TestUICapabilities(t *testing.T) {
	for caps, want := range map[string]string{
		`{}`: `{}`,
		`{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/x","text/html;profile=mcp-app"]},"io.modelcontextprotocol/tasks":{}}}`: `{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}}`,
		`{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/x"]}}}`:                                                                `{"extensions":{"io.modelcontextprotocol/ui":{}}}`,
		`{"extensions":{"io.modelcontextprotocol/ui":"odd"}}`:                                                                                   `{"extensions":{"io.modelcontextprotocol/ui":{}}}`,
		`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`:                                                                                   `{}`,
	} {
		var c mcp.ClientCapabilities
		if err := json.Unmarshal([]byte(caps), &c); err != nil {
			t.Fatal(err)
		}
		if got := upstream.Capabilities(&c); got != want {
			t.Errorf("Capabilities(%s) = %s, want %s", caps, got, want)
		}
	}
}

// FuzzUICapabilities: any client capabilities give a key whose extensions
// are at most the MCP Apps entry, with at most its one MIME type.
func FuzzUICapabilities(f *testing.F) {
	f.Add(`{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}}`)
	f.Add(`{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":[1,{},null]}}}`)
	f.Add(`{"extensions":{"io.modelcontextprotocol/ui":null,"x":{"y":[]}}}`)
	f.Fuzz(func(t *testing.T, caps string) {
		var c mcp.ClientCapabilities
		if json.Unmarshal([]byte(caps), &c) != nil {
			return
		}
		var key struct {
			Extensions map[string]struct {
				MimeTypes []string `json:"mimeTypes"`
			} `json:"extensions"`
		}
		got := upstream.Capabilities(&c)
		if err := json.Unmarshal([]byte(got), &key); err != nil {
			t.Fatalf("key %s: %v", got, err)
		}
		for name, v := range key.Extensions {
			if name != upstream.UIExtension || len(v.MimeTypes) > 1 || (len(v.MimeTypes) == 1 && v.MimeTypes[0] != upstream.UIMimeType) {
				t.Fatalf("key %s of %s", got, caps)
			}
		}
	})
}
