package sessions

import (
	"slices"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
)

// A record read in flight is shared: the first request reads it, the
// next ones wait for it; what changes are announced meanwhile is kept for
// the read to apply, and an end makes it register nothing.
func TestCacheLoads(t *testing.T) {
	var c cache
	e, l, first := c.join("s1")
	if e != nil || l == nil || !first {
		t.Fatalf("first join: %v %v %v, want a new read", e, l, first)
	}
	if e2, l2, first2 := c.join("s1"); e2 != nil || l2 != l || first2 {
		t.Fatalf("second join: %v %v %v, want the read in flight", e2, l2, first2)
	}
	c.changed("s1", &sessionstore.Record{Rev: 3, Threads: []string{"a"}}, false)
	c.changed("s1", &sessionstore.Record{Rev: 2, Level: "info", Threads: []string{"b"}}, false)
	c.changed("s1", nil, false) // too large for its notice
	c.put(&entry{st: &callpath.Session{ID: "s1"}})
	got, latest, ended, reread := c.finish("s1", l)
	if got == nil || ended || !reread {
		t.Fatalf("finish: %v ended %v reread %v, want the entry, not ended, a reread", got, ended, reread)
	}
	if latest.Rev != 3 || !slices.Equal(latest.Threads, []string{"a", "b"}) {
		t.Fatalf("latest = rev %d threads %v, want rev 3 with a and b", latest.Rev, latest.Threads)
	}

	_, l, _ = c.join("s2")
	c.changed("s2", nil, true)
	if _, _, ended, _ := c.finish("s2", l); !ended {
		t.Fatal("a session that ended while its record was read: not ended")
	}
}

// The sessions this replica holds are those it keeps and holds; taking a
// session away lets go of both.
func TestCacheHolding(t *testing.T) {
	var c cache
	st := &callpath.Session{ID: "s1"}
	c.put(&entry{st: st})
	if c.hold("s1") || !c.hold("s1") {
		t.Fatal("hold: want false, then true")
	}
	c.hold("gone") // held, but not kept here: not listed
	if h := c.holding(); len(h) != 1 || h[0].st != st {
		t.Fatalf("holding = %v, want s1", h)
	}
	if e := c.entryOf(st); e.st != st || c.get("s1") != e {
		t.Fatal("entryOf a kept session: not its entry")
	}
	c.take("s1")
	if len(c.holding()) != 0 || c.get("s1") != nil {
		t.Fatal("take left the session or its hold")
	}
	if e := c.entryOf(st); e == nil || e.st != st {
		t.Fatal("entryOf a session let go of: want one of its own")
	}
}

// A client's answer names the replica that sent the request in its id.
func TestRequestReplica(t *testing.T) {
	for _, tt := range []struct {
		id, want string
		ok       bool
	}{
		{`"mux-s-abc123-7"`, "abc123", true},
		{`"mux-s-abc-123-7"`, "", false}, // not a replica's name
		{`"mux-s--7"`, "", false},
		{`7`, "", false},
		{`"other-1"`, "", false},
	} {
		if got, ok := requestReplica([]byte(tt.id)); got != tt.want || ok != tt.ok {
			t.Errorf("requestReplica(%s) = %q %v, want %q %v", tt.id, got, ok, tt.want, tt.ok)
		}
	}
}
