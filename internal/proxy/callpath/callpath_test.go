package callpath

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestPage(t *testing.T) {
	items := []json.RawMessage{json.RawMessage(`{"n":"a"}`), json.RawMessage(`{"n":"b"}`), json.RawMessage(`{"n":"c"}`)}
	first, err := Page(items, "tools", "", 2)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Tools      []struct{ N string } `json:"tools"`
		NextCursor string               `json:"nextCursor"`
	}
	if err := json.Unmarshal(first, &p); err != nil || len(p.Tools) != 2 || p.Tools[1].N != "b" || p.NextCursor == "" {
		t.Fatalf("first page %s (%v)", first, err)
	}
	second, err := Page(items, "tools", p.NextCursor, 2)
	if err != nil || string(second) != `{"tools":[{"n":"c"}]}` {
		t.Fatalf("second page %s (%v)", second, err)
	}
	if all, _ := Page(items, "prompts", "", 0); string(all) != `{"prompts":[{"n":"a"},{"n":"b"},{"n":"c"}]}` {
		t.Fatalf("one page %s", all)
	}
	if empty, _ := Page(nil, "resources", "", 5); string(empty) != `{"resources":[]}` {
		t.Fatalf("empty %s", empty)
	}
	for _, bad := range []string{"not base64!", "LTE" /* -1 */, "OQ" /* 9 */, "eA" /* x */} {
		if _, err := Page(items, "tools", bad, 2); !errors.Is(err, errBadCursor) {
			t.Errorf("cursor %q: %v, want invalid cursor", bad, err)
		}
	}
}

func TestForwardMeta(t *testing.T) {
	for _, meta := range []string{``, `{}`, `null`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`} {
		if fwd, progress := forwardMeta(json.RawMessage(meta)); fwd != nil || progress.upstream != "" {
			t.Errorf("%q: forwarded %s, progress %v", meta, fwd, progress)
		}
	}
	fwd, progress := forwardMeta(json.RawMessage(`{"progressToken":42,"trace":"t-1","io.modelcontextprotocol/logLevel":"debug"}`))
	if progress.upstream == "" || string(progress.downstream) != "42" || !strings.HasPrefix(progress.upstream, "mux-p-") {
		t.Fatalf("progress route %+v", progress)
	}
	var m map[string]any
	if err := json.Unmarshal(fwd, &m); err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m["progressToken"] != progress.upstream || m["trace"] != "t-1" {
		t.Fatalf("forwarded _meta %s: the upstream token replaces the caller's, the protocol's keys go", fwd)
	}
	if _, other := forwardMeta(json.RawMessage(`{"progressToken":42}`)); other.upstream == progress.upstream {
		t.Fatal("two calls got the same upstream progress token")
	}
}

func TestStripProtocolMeta(t *testing.T) {
	in := `{"name":"t","_meta":{"io.modelcontextprotocol/clientCapabilities":{},"trace":"t-1"},"arguments":{}}`
	out := string(stripProtocolMeta(json.RawMessage(in)))
	if strings.Contains(out, "io.modelcontextprotocol/") || !strings.Contains(out, `"trace":"t-1"`) || !strings.Contains(out, `"arguments":{}`) {
		t.Fatalf("stripped %s", out)
	}
}
