package upstream

import (
	"encoding/json"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP Apps (the io.modelcontextprotocol/ui extension): a server may offer
// tools with a UI only to a client that declares the extension with the
// MCP App MIME type, so a call session declares it when its downstream
// client did (in the normal form uiCaps gives it: only the MIME types the
// extension defines, so a client's declaration adds at most one capability
// set), and the discovery session always does, so that every tool a server
// can offer is discovered. Each era carries it where its capabilities go:
// initialize's capabilities.extensions (2025-11-25) and each request's
// client capabilities (2026-07-28).

// UIExtension is the MCP Apps extension's capability key.
const UIExtension = "io.modelcontextprotocol/ui"

// UIMimeType is the MIME type of an MCP App's HTML resource.
const UIMimeType = "text/html;profile=mcp-app"

// uiSettings is the extension's client settings.
type uiSettings struct {
	MimeTypes []string `json:"mimeTypes,omitempty"`
}

// discoveryUI is what the discovery session declares of the extension.
var discoveryUI = map[string]json.RawMessage{UIExtension: json.RawMessage(`{"mimeTypes":["` + UIMimeType + `"]}`)}

// uiCaps is the extension part of a client's capabilities a call session
// mirrors: the extension's entry, normalized, or nil when it is not
// declared.
func uiCaps(exts map[string]any) map[string]json.RawMessage {
	v, ok := exts[UIExtension]
	if !ok {
		return nil
	}
	var s uiSettings
	if b, err := json.Marshal(v); err == nil {
		_ = json.Unmarshal(b, &s) // settings that do not decode declare no MIME type
	}
	out := uiSettings{}
	if slices.Contains(s.MimeTypes, UIMimeType) {
		out.MimeTypes = []string{UIMimeType}
	}
	b, _ := json.Marshal(out)
	return map[string]json.RawMessage{UIExtension: b}
}

// uiOnly is exts with only the extension's entry, as a client declares
// it; nil when it has none.
func uiOnly(exts map[string]json.RawMessage) map[string]any {
	v, ok := exts[UIExtension]
	if !ok {
		return nil
	}
	return map[string]any{UIExtension: v}
}

// withUI is c with the extension declared as exts (from uiCaps) has it.
func withUI(c *mcp.ClientCapabilities, exts map[string]json.RawMessage) *mcp.ClientCapabilities {
	c.Extensions = uiOnly(exts)
	return c
}
