package config

import (
	"strings"
	"testing"
)

// Issue 17 attack 5: an upstream url that is the mux itself is invalid.
func TestSelfURLIsInvalid(t *testing.T) {
	tests := []struct {
		listen, url string
		self        bool
	}{
		{"127.0.0.1:8931", "http://127.0.0.1:8931/mcp", true},
		{"127.0.0.1:8931", "http://localhost:8931/mcp", true},
		{"127.0.0.1:8931", "http://LOCALHOST.:8931/mcp", true},
		{"127.0.0.1:8931", "http://[::1]:8931/mcp", true},
		{"127.0.0.1:8931", "http://0.0.0.0:8931/sse", true},
		{"[::]:80", "http://127.0.0.1/mcp", true},
		{"10.0.0.5:8931", "http://10.0.0.5:8931/mcp", true},
		{"127.0.0.1:8931", "http://127.0.0.1:8932/mcp", false},
		{"127.0.0.1:8931", "https://127.0.0.1/mcp", false},
		{"10.0.0.5:8931", "http://127.0.0.1:8931/mcp", false},
		{"127.0.0.1:8931", "http://mcp.example:8931/mcp", false},
		{"", "http://127.0.0.1:8931/mcp", false},
	}
	for _, tt := range tests {
		doc := `{"mcpServers": {"loop": {"type": "http", "url": "` + tt.url + `"}, "ok": {"command": "x"}}}`
		cfg, err := Parse([]byte(doc), LoadOptions{Filename: "c.json", Listen: tt.listen})
		if err != nil {
			t.Fatal(err)
		}
		if self := len(cfg.Invalid) == 1; self != tt.self || len(cfg.Servers) != 2-len(cfg.Invalid) {
			t.Errorf("listen %s, url %s: invalid %v, want self %v", tt.listen, tt.url, cfg.Invalid, tt.self)
			continue
		}
		if tt.self {
			want := "loop: url: points at this mcp-mux's own listener (" + tt.listen + ")"
			if got := cfg.Invalid[0].Error(); cfg.Invalid[0].Name != "loop" || !strings.HasPrefix(got, want) {
				t.Errorf("problem %q, want %q", got, want)
			}
		}
	}
}
