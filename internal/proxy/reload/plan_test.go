package reload

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// web returns an enabled http server with a static header.
func web(name string) *config.Server {
	return &config.Server{Name: name, Enabled: true, Type: config.TypeHTTP, URL: "http://" + name + "/mcp",
		Headers: map[string]secret.Value{"X-Key": "k-" + secret.Value(name)}}
}

// stdio returns an enabled stdio server.
func stdio(name string) *config.Server {
	return &config.Server{Name: name, Enabled: true, Type: config.TypeStdio, Command: "srv-" + name}
}

// with returns a copy of sc changed by f.
func with(sc *config.Server, f func(*config.Server)) *config.Server {
	c := *sc
	f(&c)
	return &c
}

// userAuth returns sc with a user_auth block for alice.
func userAuth(sc *config.Server) *config.Server {
	return with(sc, func(c *config.Server) {
		c.UserAuth = &config.UserAuth{Enabled: true, Users: map[string]secret.Value{"alice": "Bearer a"}}
	})
}

// bare returns sc as an http server without static headers.
func bare(sc *config.Server) *config.Server {
	return with(sc, func(c *config.Server) { c.Headers = nil })
}

// describe returns sc with a new description (a presentation-only change).
func describe(sc *config.Server) *config.Server {
	return with(sc, func(c *config.Server) { c.Description = "changed" })
}

// tasks returns sc with a task toolset.
func tasks(sc *config.Server) *config.Server {
	return with(sc, func(c *config.Server) {
		c.TaskToolsets = []config.TaskToolset{{Name: "job", SubmitTool: "submit", StatusTool: "status", CancelTool: "cancel"}}
	})
}

// moved returns sc with a new URL (a connection change).
func moved(sc *config.Server) *config.Server {
	return with(sc, func(c *config.Server) { c.URL += "/v2" })
}

// disabled returns sc disabled.
func disabled(sc *config.Server) *config.Server {
	return with(sc, func(c *config.Server) { c.Enabled = false })
}

// view is the plan's view of running servers built from scs.
func view(scs ...*config.Server) []Running {
	out := make([]Running, len(scs))
	for i, sc := range scs {
		out[i] = Running{Name: sc.Name, Fingerprint: sc.Fingerprint(), HeaderKey: HeaderKey(HeaderOptions(sc, "")), Server: sc}
	}
	return out
}

// brief renders an action as "name kind[ resolver][ <prev][: problem]".
func brief(a Action) string {
	s := a.Name + " " + a.Kind.String()
	if a.Kind == Keep || a.Kind == Reconnect {
		s += " " + a.Resolver.String()
	}
	if a.Prev >= 0 {
		s += fmt.Sprintf(" <%d", a.Prev)
	}
	if a.Problem != "" {
		s += ": " + a.Problem
	}
	return s
}

func TestPlan(t *testing.T) {
	a, b, c, s := web("a"), web("b"), web("c"), stdio("s")
	tests := []struct {
		name    string
		running []Running
		servers []*config.Server
		invalid []string
		fresh   bool
		refuse  []string // servers Refuse says no for
		want    []string
		asked   []string // the Refuse calls, "name→next" ("-" for none)
	}{
		{name: "first config starts every server", servers: []*config.Server{a, s},
			want: []string{"a reconnect new", "s reconnect none"}, asked: []string{"-→a", "-→s"}},
		{name: "refused addition is left out", running: view(a), servers: []*config.Server{a, b}, refuse: []string{"b"},
			want: []string{"a keep reuse <0", "b refuse: no for b"}, asked: []string{"-→b"}},
		{name: "task_toolsets change is asked", running: view(a), servers: []*config.Server{tasks(a)}, refuse: []string{"a"},
			want: []string{"a refuse <0: no for a"}, asked: []string{"a→a"}},
		{name: "task_toolsets removal is asked", running: view(tasks(a)), servers: []*config.Server{a},
			want: []string{"a keep reuse <0"}, asked: []string{"a→a"}},
		{name: "unchanged servers keep upstream and resolver", running: view(a, s), servers: []*config.Server{a, s},
			want: []string{"a keep reuse <0", "s keep none <1"}},
		{name: "presentation change keeps", running: view(a), servers: []*config.Server{describe(a)},
			want: []string{"a keep reuse <0"}},
		{name: "header inputs outside the fingerprint get a new resolver", running: view(a), servers: []*config.Server{userAuth(a)},
			want: []string{"a keep new <0"}},
		{name: "header rules removed drop the resolver", running: view(userAuth(bare(a))), servers: []*config.Server{bare(a)},
			want: []string{"a keep none <0"}},
		{name: "connection change reconnects with a new resolver", running: view(a), servers: []*config.Server{moved(a)},
			want: []string{"a reconnect new <0"}, asked: []string{"a→a"}},
		{name: "stdio change reconnects without resolver", running: view(s), servers: []*config.Server{with(s, func(c *config.Server) { c.Args = []string{"-v"} })},
			want: []string{"s reconnect none <0"}, asked: []string{"s→s"}},
		{name: "fresh reconnects every server and reuses resolvers", running: view(a, s), servers: []*config.Server{a, s}, fresh: true,
			want: []string{"a reconnect reuse <0", "s reconnect none <1"}, asked: []string{"a→a", "s→s"}},
		{name: "fresh with changed header inputs builds a resolver", running: view(a), servers: []*config.Server{userAuth(a)}, fresh: true,
			want: []string{"a reconnect new <0"}, asked: []string{"a→a"}},
		{name: "refused change holds the running server", running: view(a, b), servers: []*config.Server{moved(a), moved(b)}, refuse: []string{"a"},
			want: []string{"a refuse <0: no for a", "b reconnect new <1"}, asked: []string{"a→a", "b→b"}},
		{name: "refused fresh holds the running server", running: view(a), servers: []*config.Server{a}, fresh: true, refuse: []string{"a"},
			want: []string{"a refuse <0: no for a"}, asked: []string{"a→a"}},
		{name: "unchanged server is not asked", running: view(a), servers: []*config.Server{describe(a)}, refuse: []string{"a"},
			want: []string{"a keep reuse <0"}},
		{name: "removed server is dropped", running: view(a, b), servers: []*config.Server{b},
			want: []string{"b keep reuse <1", "a drop <0"}, asked: []string{"a→-"}},
		{name: "refused removal holds", running: view(a, b), servers: []*config.Server{b}, refuse: []string{"a"},
			want: []string{"b keep reuse <1", "a refuse <0: no for a"}, asked: []string{"a→-"}},
		{name: "disabled server is dropped", running: view(a), servers: []*config.Server{disabled(a)},
			want: []string{"a drop <0"}, asked: []string{"a→-"}},
		{name: "refused disabling holds", running: view(a), servers: []*config.Server{disabled(a)}, refuse: []string{"a"},
			want: []string{"a refuse <0: no for a"}, asked: []string{"a→-"}},
		{name: "disabled and not running: nothing", servers: []*config.Server{disabled(a)}},
		{name: "invalid running server keeps its last good settings", running: view(a, b), servers: []*config.Server{b}, invalid: []string{"a"},
			want: []string{"a skip <0: " + invalidKept, "b keep reuse <1"}},
		{name: "invalid and not running: nothing", running: view(b), servers: []*config.Server{b}, invalid: []string{"a"},
			want: []string{"b keep reuse <0"}},
		{name: "invalid skip is never refused", running: view(a), invalid: []string{"a"}, refuse: []string{"a"},
			want: []string{"a skip <0: " + invalidKept}},
		{name: "named and invalid: the named settings win", running: view(a), servers: []*config.Server{moved(a)}, invalid: []string{"a"},
			want: []string{"a reconnect new <0"}, asked: []string{"a→a"}},
		{name: "order: invalid, config order, removed", running: view(a, b, c, s), servers: []*config.Server{describe(c), moved(b), web("d")}, invalid: []string{"s"},
			want:  []string{"s skip <3: " + invalidKept, "c keep reuse <2", "b reconnect new <1", "d reconnect new", "a drop <0"},
			asked: []string{"b→b", "-→d", "a→-"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{Servers: tt.servers}
			for _, n := range tt.invalid {
				cfg.Invalid = append(cfg.Invalid, config.ServerError{Name: n})
			}
			var asked []string
			refuse := func(running, next *config.Server) error {
				to := "-"
				if next != nil {
					to = next.Name
				}
				from, name := "-", to
				if running != nil {
					from, name = running.Name, running.Name
				}
				asked = append(asked, from+"→"+to)
				if slices.Contains(tt.refuse, name) {
					return errors.New("no for " + name)
				}
				return nil
			}
			var got []string
			for _, act := range Plan(tt.running, cfg, Options{Fresh: tt.fresh, Refuse: refuse}) {
				got = append(got, brief(act))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("actions:\n got %q\nwant %q", got, tt.want)
			}
			if !slices.Equal(asked, tt.asked) {
				t.Errorf("Refuse calls: got %q, want %q", asked, tt.asked)
			}
		})
	}
}

// TestPlanActionSettings checks what the executor takes from the actions:
// the new settings, fingerprints, header keys and resolver options.
func TestPlanActionSettings(t *testing.T) {
	a, s := web("a"), stdio("s")
	acts := Plan(view(a), &config.Config{Servers: []*config.Server{userAuth(a), s}}, Options{})
	if len(acts) != 2 {
		t.Fatalf("got %d actions, want 2", len(acts))
	}
	keep, start := acts[0], acts[1]
	if keep.Next.UserAuth == nil || keep.Fingerprint != a.Fingerprint() || keep.Headers == nil || keep.Headers.UserAuth.Users["alice"] != "Bearer a" {
		t.Errorf("keep action = %+v", keep)
	}
	if keep.HeaderKey == "" || keep.HeaderKey == HeaderKey(HeaderOptions(a, "")) || keep.HeaderKey != HeaderKey(keep.Headers) {
		t.Errorf("keep header key %q does not identify the new rules", keep.HeaderKey)
	}
	if start.Next != s || start.Headers != nil || start.HeaderKey != "" || start.Fingerprint != s.Fingerprint() {
		t.Errorf("stdio action = %+v", start)
	}
	reuse := Plan(view(a), &config.Config{Servers: []*config.Server{describe(a)}}, Options{})[0]
	if reuse.Headers != nil || reuse.HeaderKey != HeaderKey(HeaderOptions(a, "")) || reuse.Next.Description != "changed" {
		t.Errorf("reuse action = %+v", reuse)
	}
}

// TestPlanWithoutRefuse checks that a nil Refuse allows every change.
func TestPlanWithoutRefuse(t *testing.T) {
	a := web("a")
	var got []string
	for _, act := range Plan(view(a), &config.Config{Servers: []*config.Server{moved(a)}}, Options{}) {
		got = append(got, brief(act))
	}
	if want := []string{"a reconnect new <0"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
