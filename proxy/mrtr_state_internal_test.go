package proxy

import (
	"strings"
	"testing"
	"time"
)

func TestStateSealer(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := newStateSealer(strings.Repeat("k", 32))
	s.now = func() time.Time { return now }
	state := s.seal(stateEnvelope{Caller: "alice", Server: "db", Target: "tools/call db_q", Park: "p1", Replica: "r1"})
	e, err := s.open(state, "alice", "db", "tools/call db_q")
	if err != nil || e.Park != "p1" || e.Replica != "r1" {
		t.Fatalf("open: %+v %v", e, err)
	}
	for name, c := range map[string]struct {
		sealer                  *stateSealer
		state, caller, srv, tgt string
		want                    string
	}{
		"other key":    {newStateSealer(strings.Repeat("x", 32)), state, "alice", "db", "tools/call db_q", "integrity"},
		"tampered":     {s, state + "-TAMPERED", "alice", "db", "tools/call db_q", "integrity"},
		"no mac":       {s, strings.Split(state, ".")[0], "alice", "db", "tools/call db_q", "integrity"},
		"other caller": {s, state, "bob", "db", "tools/call db_q", "another caller"},
		"other server": {s, state, "alice", "web", "tools/call db_q", "another request"},
		"other tool":   {s, state, "alice", "db", "tools/call db_r", "another request"},
		"too long":     {s, strings.Repeat("a", maxStateLen+1), "alice", "db", "tools/call db_q", "longer"},
	} {
		if _, err := c.sealer.open(c.state, c.caller, c.srv, c.tgt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
	now = now.Add(stateTTL + time.Second)
	if _, err := s.open(state, "alice", "db", "tools/call db_q"); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired: %v", err)
	}
}

func FuzzStateOpen(f *testing.F) {
	s := newStateSealer("")
	f.Add(s.seal(stateEnvelope{Caller: "u", Server: "s", Target: "t"}))
	f.Add("a.b")
	f.Add("")
	f.Fuzz(func(t *testing.T, state string) {
		if e, err := s.open(state, "u", "s", "t"); err == nil && e.Caller != "u" {
			t.Fatalf("opened a state for %q", e.Caller)
		}
	})
}
