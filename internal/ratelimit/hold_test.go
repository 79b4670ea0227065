package ratelimit_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/ratelimit"
)

// TestPauseResume: a paused call (parked on its client) holds no slot;
// Resume takes it again, refused while the cap is full (the call then
// holds nothing and stays paused), admitted once a slot is free; a call
// released meanwhile takes nothing on Resume. In process and shared.
func TestPauseResume(t *testing.T) {
	r := mcptest.StartRedis(t, false)
	for name, l := range map[string]*ratelimit.Limiter{
		"in process": newLimiter(t, nil, nil),
		"shared":     newLimiter(t, sharedStore(r, "pause-test:"), nil),
	} {
		t.Run(name, func(t *testing.T) {
			l.SetRules(perCallerTool(0, 1))
			ctx := context.Background()
			admit := func(what string, want bool) ratelimit.Decision {
				t.Helper()
				d := l.Admit(ctx, alice)
				if d.Allowed != want {
					t.Fatalf("%s: admitted %v, want %v (%s)", what, d.Allowed, want, d.Message)
				}
				return d
			}
			parked := admit("the first call", true)
			admit("a second call while the first runs", false)
			parked.Pause()
			other := admit("a call while the first is parked", true)
			if d := parked.Resume(ctx); d.Allowed || d.Kind != ratelimit.KindInFlight ||
				!strings.Contains(d.Message, `concurrency limit "search-per-caller" exceeded: 1 calls in flight`) {
				t.Fatalf("resuming while the slot is taken: %+v", d)
			}
			admit("a call while the refused one is still parked", false)
			other.Release()
			if d := parked.Resume(ctx); !d.Allowed {
				t.Fatalf("resuming with the slot free: %s", d.Message)
			}
			admit("a call while the resumed one runs", false)
			parked.Release()
			if d := parked.Resume(ctx); !d.Allowed {
				t.Fatalf("resuming a released call: %s", d.Message)
			}
			last := admit("a call after the resumed one ended", true)
			admit("a call while that one runs (Resume of a released call took nothing)", false)
			last.Release()
		})
	}
}

// TestPauseRaceRelease: Pause, Resume and Release of one call from
// different goroutines leave nothing held (run with -race).
func TestPauseRaceRelease(t *testing.T) {
	l := newLimiter(t, nil, nil)
	l.SetRules(perCallerTool(0, 1))
	for range 200 {
		d := l.Admit(context.Background(), alice)
		if !d.Allowed {
			t.Fatalf("a slot was left held: %s", d.Message)
		}
		var wg sync.WaitGroup
		wg.Go(func() { d.Pause(); d.Resume(context.Background()) })
		wg.Go(d.Release)
		wg.Wait()
		d.Release()
	}
	if d := l.Admit(context.Background(), alice); !d.Allowed {
		t.Fatalf("a slot was left held: %s", d.Message)
	} else {
		d.Release()
	}
}

// TestMethodBudgets: a request that names no tool matches only rules
// without a tool glob, and its method stands in for the tool in the tool
// and caller_tool scopes: completions and prompts have budgets of their
// own, per caller for caller_tool.
func TestMethodBudgets(t *testing.T) {
	l := newLimiter(t, nil, nil)
	l.SetRules(config.Limits{Rules: []config.LimitRule{
		{Name: "per-method", Scope: config.LimitScopeTool, InFlight: 1},
		{Name: "per-caller-method", Scope: config.LimitScopeCallerTool, InFlight: 1},
		{Name: "search-only", Scope: config.LimitScopeCaller, Tool: "web_*", InFlight: 1},
	}})
	ctx := context.Background()
	complete := ratelimit.Call{Caller: "alice", Server: "web", Method: "completion/complete"}
	d := l.Admit(ctx, complete)
	if !d.Allowed {
		t.Fatal(d.Message)
	}
	defer d.Release()
	if r := l.Admit(ctx, complete); r.Allowed || r.Rule != "per-method" {
		t.Fatalf("a second completion: %+v", r)
	}
	bob := complete
	bob.Caller = "bob"
	if r := l.Admit(ctx, bob); r.Allowed || r.Rule != "per-method" {
		t.Fatalf("bob's completion under the per-method rule: %+v", r)
	}
	prompt := ratelimit.Call{Caller: "alice", Server: "web", Method: "prompts/get"}
	p := l.Admit(ctx, prompt)
	if !p.Allowed {
		t.Fatalf("a prompt while a completion runs: %s", p.Message)
	}
	p.Release()
	search := l.Admit(ctx, alice)
	if !search.Allowed {
		t.Fatalf("a tool call while a completion runs: %s", search.Message)
	}
	search.Release()
}
