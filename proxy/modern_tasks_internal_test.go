package proxy

import (
	"strings"
	"testing"
)

func TestTaskIDSealing(t *testing.T) {
	s := newStateSealer(strings.Repeat("k", 32))
	id := s.sealTaskID("alice", "builder", "remote-7")
	if !strings.HasPrefix(id, passTaskPrefix) || strings.Contains(id, "builder") || strings.Contains(id, "remote-7") {
		t.Fatalf("id %q", id)
	}
	if id2 := s.sealTaskID("alice", "builder", "remote-7"); id2 == id {
		t.Fatal("two seals of one task gave the same id (the nonce is not random)")
	}
	if srv, rid, ok := s.openTaskID(id, "alice"); !ok || srv != "builder" || rid != "remote-7" {
		t.Fatalf("open: %q %q %v", srv, rid, ok)
	}
	for name, c := range map[string]struct {
		s        *stateSealer
		id, user string
	}{
		"other user": {s, id, "bob"},
		"other key":  {newStateSealer(strings.Repeat("x", 32)), id, "alice"},
		"tampered":   {s, id[:20] + map[bool]string{true: "B", false: "A"}[id[20] == 'A'] + id[21:], "alice"},
		"truncated":  {s, id[:len(passTaskPrefix)+10], "alice"},
		"empty":      {s, passTaskPrefix, "alice"},
		"not base64": {s, passTaskPrefix + "%%%", "alice"},
	} {
		if _, _, ok := c.s.openTaskID(c.id, c.user); ok {
			t.Errorf("%s: opened", name)
		}
	}
}

// FuzzOpenTaskID: a client's task id never crashes the opener, and only a
// sealed one opens.
func FuzzOpenTaskID(f *testing.F) {
	s := newStateSealer(strings.Repeat("k", 32))
	f.Add(s.sealTaskID("alice", "builder", "remote-7"))
	f.Add(passTaskPrefix)
	f.Add(passTaskPrefix + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, id string) {
		if srv, rid, ok := s.openTaskID(id, "alice"); ok && (srv != "builder" || rid != "remote-7") {
			t.Fatalf("forged id %q opened to %q %q", id, srv, rid)
		}
	})
}
