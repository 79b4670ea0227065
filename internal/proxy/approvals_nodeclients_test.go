package proxy_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/nodeclients"
)

// TestCallerApprovalTypeScript: the TypeScript SDK client (2025-11-25)
// and the v2 client negotiating 2026-07-28 are asked before a
// destructive call runs: approve runs it once, decline never.
func TestCallerApprovalTypeScript(t *testing.T) {
	l, upURL := newLedger(t)
	m := approvalsMux(t, approvalsConfig(upURL, 1), nil)
	dir := nodeclients.Install(t)
	script := nodeclients.Script(t, "approvals.mjs")
	for _, c := range []struct{ flavor, mode, era string }{
		{"sdk1", "legacy", "2025-11-25"},
		{"v2", "auto", "2026-07-28"},
	} {
		t.Run(c.flavor+"-"+c.mode, func(t *testing.T) {
			for _, answer := range []string{"approve", "decline"} {
				path := "/ts/" + c.flavor + "/" + answer
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				cmd := exec.CommandContext(ctx, nodeclients.Node(t), script, c.flavor, c.mode, m.ts.URL+"/mcp", answer, "up_remove", path)
				cmd.Dir = dir
				out, err := cmd.Output()
				cancel()
				var r struct {
					Era, Text, Error string
					IsError          bool
					Asked            []string
				}
				if json.Unmarshal(out, &r) != nil || err != nil || r.Error != "" {
					t.Fatalf("%s: %v: %s %s", answer, err, out, r.Error)
				}
				if r.Era != c.era {
					t.Errorf("negotiated %q, want %q", r.Era, c.era)
				}
				if len(r.Asked) != 1 || !strings.Contains(r.Asked[0], `"up_remove"`) {
					t.Errorf("%s: asked %q, want one question naming the tool", answer, r.Asked)
				}
				want := 0
				if answer == "approve" {
					want = 1
				}
				if got := l.count("remove/" + path); got != want || r.IsError != (want == 0) {
					t.Errorf("%s: upstream ran %d times (want %d); result error=%v %q", answer, got, want, r.IsError, r.Text)
				}
			}
		})
	}
}
