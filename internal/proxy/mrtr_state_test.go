package proxy_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// Attack 12b: the requestState a caller gets (a bridged legacy call's, and
// a 2026-07-28 upstream's sealed in mcp-mux's envelope) does not name the
// caller, the server or the upstream's own state, however it is decoded;
// the retry with it still completes.
func TestModernRequestStateConfidential(t *testing.T) {
	const user, legacy, modern = "alice-sentinel-user", "legacysentinel", "modernsentinel"
	up := mcptest.ServeHTTP(t, mcptest.NewServer(legacy))
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {%q: {"type": "http", "url": %q}, %q: {"type": "http", "url": %q}},
		"inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"}}`, legacy, up.URL+"/mcp", modern, mrtrServer(t)), proxy.Options{})
	url := m.ts.URL + "/mcp"
	who := map[string]string{"X-User": user}
	const caps = `{"elicitation":{}}`
	for _, c := range []struct{ tool, args, answer, want string }{
		{legacy + "_elicit", `{"tag":"t1"}`, `{"action":"accept","content":{"answer":"forty-two"}}`, "forty-two"},
		{modern + "_ask", `{}`, `{"action":"accept","content":{"name":"Ada"}}`, "hello Ada"},
	} {
		_, r := modernCall(t, url, who, caps, "tools/call", c.tool, `"name":"`+c.tool+`","arguments":`+c.args)
		reqs, state := inputRequiredOf(t, r)
		for _, secret := range []string{user, legacy, modern, "upstream-state-1", "tools/call"} {
			if readable(state, secret) {
				t.Errorf("%s: the requestState %q reveals %q", c.tool, state, secret) // and retry: the parked call must end
			}
		}
		var key string
		for k := range reqs {
			key = k
		}
		_, r = modernCall(t, url, who, caps, "tools/call", c.tool, `"name":"`+c.tool+`","arguments":`+c.args+
			`,"inputResponses":{"`+key+`":`+c.answer+`},"requestState":`+mustQuote(state))
		if r.Error != nil || !strings.Contains(string(r.Result), c.want) {
			t.Fatalf("%s retry: %s %+v", c.tool, r.Result, r.Error)
		}
	}
}

// readable reports whether s shows text as is or decoded from base64 (any
// alphabet, any '.'-separated part).
func readable(s, text string) bool {
	if strings.Contains(s, text) {
		return true
	}
	for _, part := range strings.Split(s, ".") {
		for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.StdEncoding} {
			if b, err := enc.DecodeString(part); err == nil && strings.Contains(string(b), text) {
				return true
			}
		}
	}
	return false
}
