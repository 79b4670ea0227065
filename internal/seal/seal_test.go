package seal

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestStateSealer(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := New(strings.Repeat("k", 32))
	s.now = func() time.Time { return now }
	state := s.SealState(State{Caller: "alice", Server: "db", Target: "tools/call db_q", Park: "park-7f3a9c1e55", Replica: "replica-b81d0e77"})
	e, err := s.OpenState(state, "alice", "db", "tools/call db_q")
	if err != nil || e.Park != "park-7f3a9c1e55" || e.Replica != "replica-b81d0e77" {
		t.Fatalf("open: %+v %v", e, err)
	}
	for name, c := range map[string]struct {
		sealer                  *Sealer
		state, caller, srv, tgt string
		want                    string
	}{
		"other key":    {New(strings.Repeat("x", 32)), state, "alice", "db", "tools/call db_q", "integrity"},
		"tampered":     {s, state + "-TAMPERED", "alice", "db", "tools/call db_q", "integrity"},
		"truncated":    {s, state[:len(state)-4], "alice", "db", "tools/call db_q", "integrity"},
		"no prefix":    {s, strings.TrimPrefix(state, statePrefix), "alice", "db", "tools/call db_q", "integrity"},
		"flipped":      {s, flipLast(state), "alice", "db", "tools/call db_q", "integrity"},
		"signed v1":    {s, signedV1(s, `{"v":1,"c":"alice","s":"db","t":"tools/call db_q","e":1900000000}`), "alice", "db", "tools/call db_q", "integrity"},
		"other caller": {s, state, "bob", "db", "tools/call db_q", "another caller"},
		"other server": {s, state, "alice", "web", "tools/call db_q", "another request"},
		"other tool":   {s, state, "alice", "db", "tools/call db_r", "another request"},
		"too long":     {s, strings.Repeat("a", MaxStateLen+1), "alice", "db", "tools/call db_q", "longer"},
	} {
		if _, err := c.sealer.OpenState(c.state, c.caller, c.srv, c.tgt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
	// Sealed, not signed: nothing of the envelope is readable. The values
	// looked for are long enough that random ciphertext never holds them.
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(state, statePrefix))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"alice", "tools/call db_q", "park-7f3a9c1e55", "replica-b81d0e77", `"c":"alice"`} {
		if strings.Contains(state, secret) || strings.Contains(string(b), secret) {
			t.Errorf("the state reveals %q", secret)
		}
	}
	if again := s.SealState(State{Caller: "alice", Server: "db", Target: "tools/call db_q", Park: "park-7f3a9c1e55", Replica: "replica-b81d0e77"}); again == state {
		t.Error("two seals of one envelope are equal: the nonce is not fresh")
	}
	// A state and a task id are sealed under different keys.
	if _, err := s.OpenState(statePrefix+strings.TrimPrefix(s.SealTaskID("alice", "db", "x"), TaskIDPrefix), "alice", "db", "tools/call db_q"); err == nil {
		t.Error("a task id opened as a requestState")
	}
	now = now.Add(StateTTL + time.Second)
	if _, err := s.OpenState(state, "alice", "db", "tools/call db_q"); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired: %v", err)
	}
}

// The integrity error's text is the one proxy answered before the move.
func TestStateIntegrityMessage(t *testing.T) {
	_, err := New("").OpenState("s2.AAAA", "u", "s", "t")
	if want := "requestState failed its integrity check (tampered, of an older format, or minted under another key)"; err == nil || err.Error() != want {
		t.Fatalf("%v, want %q", err, want)
	}
}

// flipLast changes the last base64 character of a state.
func flipLast(s string) string {
	c := byte('A')
	if s[len(s)-1] == 'A' {
		c = 'B'
	}
	return s[:len(s)-1] + string(c)
}

// signedV1 is a requestState of the older format: JSON signed, not sealed.
func signedV1(s *Sealer, envelope string) string {
	payload := base64.RawURLEncoding.EncodeToString([]byte(envelope))
	m := hmac.New(sha256.New, s.keys.Load().key)
	m.Write([]byte("mcp-mux requestState v1\x00"))
	m.Write([]byte(payload))
	return payload + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func FuzzStateOpen(f *testing.F) {
	s := New("")
	f.Add(s.SealState(State{Caller: "u", Server: "s", Target: "t"}))
	f.Add(signedV1(s, `{"v":1,"c":"u","s":"s","t":"t","e":9999999999}`))
	f.Add(statePrefix)
	f.Add(statePrefix + "AAAA")
	f.Add("a.b")
	f.Add("")
	f.Fuzz(func(t *testing.T, state string) {
		if e, err := s.OpenState(state, "u", "s", "t"); err == nil && e.Caller != "u" {
			t.Fatalf("opened a state for %q", e.Caller)
		}
	})
}

func TestTaskIDSealing(t *testing.T) {
	s := New(strings.Repeat("k", 32))
	id := s.SealTaskID("alice", "builder", "remote-7")
	if !strings.HasPrefix(id, TaskIDPrefix) || strings.Contains(id, "builder") || strings.Contains(id, "remote-7") {
		t.Fatalf("id %q", id)
	}
	if id2 := s.SealTaskID("alice", "builder", "remote-7"); id2 == id {
		t.Fatal("two seals of one task gave the same id (the nonce is not random)")
	}
	if srv, rid, ok := s.OpenTaskID(id, "alice"); !ok || srv != "builder" || rid != "remote-7" {
		t.Fatalf("open: %q %q %v", srv, rid, ok)
	}
	for name, c := range map[string]struct {
		s        *Sealer
		id, user string
	}{
		"other user": {s, id, "bob"},
		"other key":  {New(strings.Repeat("x", 32)), id, "alice"},
		"tampered":   {s, id[:20] + map[bool]string{true: "B", false: "A"}[id[20] == 'A'] + id[21:], "alice"},
		"truncated":  {s, id[:len(TaskIDPrefix)+10], "alice"},
		"empty":      {s, TaskIDPrefix, "alice"},
		"not base64": {s, TaskIDPrefix + "%%%", "alice"},
	} {
		if _, _, ok := c.s.OpenTaskID(c.id, c.user); ok {
			t.Errorf("%s: opened", name)
		}
	}
}

// FuzzOpenTaskID: a client's task id never crashes the opener, and only a
// sealed one opens.
func FuzzOpenTaskID(f *testing.F) {
	s := New(strings.Repeat("k", 32))
	f.Add(s.SealTaskID("alice", "builder", "remote-7"))
	f.Add(TaskIDPrefix)
	f.Add(TaskIDPrefix + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, id string) {
		if srv, rid, ok := s.OpenTaskID(id, "alice"); ok && (srv != "builder" || rid != "remote-7") {
			t.Fatalf("forged id %q opened to %q %q", id, srv, rid)
		}
	})
}

// sessionsLabel and sessionsPrefix make a generic purpose, as the
// shared-session issue will use one.
const (
	sessionsLabel  = "mcp-mux session id v1"
	sessionsPrefix = "mux-sess-"
)

func TestToken(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := New(strings.Repeat("k", 32))
	s.now = func() time.Time { return now }
	sessions := s.Purpose(sessionsLabel, sessionsPrefix)
	tok := sessions.Seal("alice", []byte("session-7f3a9c1e55"), time.Hour)
	if !strings.HasPrefix(tok, sessionsPrefix) || strings.Contains(tok, "alice") || strings.Contains(tok, "session-7f3a9c1e55") {
		t.Fatalf("token %q", tok)
	}
	if d, err := sessions.Open(tok, "alice"); err != nil || string(d) != "session-7f3a9c1e55" {
		t.Fatalf("open: %q %v", d, err)
	}
	if again := sessions.Seal("alice", []byte("session-7f3a9c1e55"), time.Hour); again == tok {
		t.Error("two seals of one token are equal: the nonce is not fresh")
	}
	if d, err := s.Purpose(sessionsLabel, sessionsPrefix).Open(tok, "alice"); err != nil || string(d) != "session-7f3a9c1e55" {
		t.Errorf("open by the same purpose derived again: %q %v", d, err)
	}
	for name, c := range map[string]struct {
		p        *Purpose
		tok, who string
		want     string
	}{
		"other caller":  {sessions, tok, "bob", "another caller"},
		"other key":     {New(strings.Repeat("x", 32)).Purpose(sessionsLabel, sessionsPrefix), tok, "alice", "integrity"},
		"other purpose": {s.Purpose("mcp-mux other v1", sessionsPrefix), tok, "alice", "integrity"},
		"other prefix":  {s.Purpose(sessionsLabel, "x-"), "x-" + strings.TrimPrefix(tok, sessionsPrefix), "alice", "integrity"},
		"no prefix":     {sessions, strings.TrimPrefix(tok, sessionsPrefix), "alice", "integrity"},
		"flipped":       {sessions, flipLast(tok), "alice", "integrity"},
		"truncated":     {sessions, tok[:len(tok)-4], "alice", "integrity"},
		"too long":      {sessions, sessionsPrefix + strings.Repeat("A", MaxStateLen), "alice", "integrity"},
		"task id":       {s.Purpose(taskLabel, TaskIDPrefix), s.SealTaskID("alice", "db", "x"), "alice", "integrity"},
		"state":         {s.Purpose(stateLabel, statePrefix), s.SealState(State{Caller: "alice"}), "alice", "integrity"},
	} {
		if _, err := c.p.Open(c.tok, c.who); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
	forever := sessions.Seal("alice", nil, 0)
	now = now.Add(time.Hour + time.Second)
	if _, err := sessions.Open(tok, "alice"); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired: %v", err)
	}
	if d, err := sessions.Open(forever, "alice"); err != nil || len(d) != 0 {
		t.Errorf("a token without ttl: %q %v", d, err)
	}
}

// FuzzOpenToken: a client's token never crashes the opener, and only a
// sealed one opens, to its own data.
func FuzzOpenToken(f *testing.F) {
	sessions := New(strings.Repeat("k", 32)).Purpose(sessionsLabel, sessionsPrefix)
	f.Add(sessions.Seal("alice", []byte("d"), 0))
	f.Add(sessions.Seal("alice", []byte("d"), time.Hour))
	f.Add(sessionsPrefix)
	f.Add(sessionsPrefix + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		if d, err := sessions.Open(tok, "alice"); err == nil && !bytes.Equal(d, []byte("d")) {
			t.Fatalf("forged token %q opened to %q", tok, d)
		}
	})
}

// golden are tokens minted by proxy's stateSealer before the seal package
// existed (testdata/golden.json).
type golden struct {
	Key   string `json:"key"`
	Now   int64  `json:"now"`
	State struct {
		Token, Caller, Server, Target, Park, Replica, Upstream string
	} `json:"state"`
	Task struct {
		Token, User, Server, Remote string
	} `json:"task"`
	Replica string `json:"replica"`
}

// TestGolden: tokens already issued keep opening, to the same content, and
// the replica id derived from a key is unchanged.
func TestGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	s := New(g.Key)
	s.now = func() time.Time { return time.Unix(g.Now, 0) }
	st := g.State
	e, err := s.OpenState(st.Token, st.Caller, st.Server, st.Target)
	if err != nil {
		t.Fatalf("golden requestState: %v", err)
	}
	if e.Park != st.Park || e.Replica != st.Replica || e.Upstream != st.Upstream || e.Expires != g.Now+int64(StateTTL/time.Second) {
		t.Errorf("golden requestState opened to %+v", e)
	}
	if srv, rid, ok := s.OpenTaskID(g.Task.Token, g.Task.User); !ok || srv != g.Task.Server || rid != g.Task.Remote {
		t.Errorf("golden task id opened to %q %q %v", srv, rid, ok)
	}
	if got := fmt.Sprintf("%x", s.MAC("replica")[:8]); got != g.Replica {
		t.Errorf("replica id %s, want %s", got, g.Replica)
	}
}

// TestRekey: replicas that adopt another shared secret seal under it; what
// was sealed under the one it replaced still opens, under earlier ones not.
func TestRekey(t *testing.T) {
	a, b := New(strings.Repeat("a", 32)), New(strings.Repeat("b", 32))
	old := a.SealState(State{Caller: "u", Server: "s", Target: "t"})
	oldTask := a.SealTaskID("u", "s", "r")
	if _, err := b.OpenState(a.SealState(State{Caller: "u", Server: "s", Target: "t"}), "u", "s", "t"); err == nil {
		t.Fatal("a state opened under another secret")
	}
	mac := a.MAC("x")
	a.Rekey(strings.Repeat("b", 32))
	a.Rekey("") // nothing
	for name, s := range map[string]*Sealer{"a by b": b, "b by a": a} {
		other := map[*Sealer]*Sealer{a: b, b: a}[s]
		if _, err := other.OpenState(s.SealState(State{Caller: "u", Server: "s", Target: "t"}), "u", "s", "t"); err != nil {
			t.Fatalf("after Rekey, %s: %v", name, err)
		}
		if _, _, ok := other.OpenTaskID(s.SealTaskID("u", "s", "r"), "u"); !ok {
			t.Fatalf("after Rekey, a task id %s does not open", name)
		}
	}
	if _, err := a.OpenState(old, "u", "s", "t"); err != nil {
		t.Fatalf("a state sealed under the replaced secret: %v", err)
	}
	if _, _, ok := a.OpenTaskID(oldTask, "u"); !ok {
		t.Fatal("a task id sealed under the replaced secret does not open")
	}
	if !bytes.Equal(a.MAC("x"), mac) {
		t.Fatal("MAC changed with Rekey")
	}
	a.Rekey(strings.Repeat("c", 32))
	a.Rekey(strings.Repeat("d", 32))
	if _, err := a.OpenState(old, "u", "s", "t"); err == nil {
		t.Fatal("a state sealed two secrets ago still opens")
	}
}
