package catalog

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/config"
)

// TestGuardFailClosed: an evaluation error denies with DeerFlow's evaluator
// text when fail_closed is set and allows otherwise.
func TestGuardFailClosed(t *testing.T) {
	for _, failing := range []func(string) (guardDecision, error){
		func(string) (guardDecision, error) { return guardDecision{}, errors.New("provider down") },
		func(string) (guardDecision, error) { panic("provider bug") },
	} {
		g := newGuard(config.Guardrails{Enabled: true, FailClosed: true})
		g.evaluate = failing
		const want = `{"content":[{"type":"text","text":"Guardrail denied: tool 'x_y' was blocked (oap.evaluator_error). Reason: guardrail provider error (fail-closed). Choose an alternative approach."}],"isError":true}`
		if got := string(g.check("x_y", hclog.NewNullLogger())); got != want {
			t.Errorf("fail-closed:\n got %s\nwant %s", got, want)
		}
		g.failClosed = false
		if got := g.check("x_y", hclog.NewNullLogger()); got != nil {
			t.Errorf("fail-open denied: %s", got)
		}
	}
	// A provider that denies without a reason gets DeerFlow's fallback.
	g := newGuard(config.Guardrails{Enabled: true, FailClosed: true})
	g.evaluate = func(string) (guardDecision, error) { return guardDecision{}, nil }
	if got := string(g.check("x_y", hclog.NewNullLogger())); !strings.Contains(got, "was blocked (oap.denied). Reason: blocked by guardrail policy.") {
		t.Errorf("no-reason deny = %s", got)
	}
}
