package proxy

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

func TestStateSealer(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := newStateSealer(strings.Repeat("k", 32))
	s.now = func() time.Time { return now }
	state := s.seal(stateEnvelope{Caller: "alice", Server: "db", Target: "tools/call db_q", Park: "park-7f3a9c1e55", Replica: "replica-b81d0e77"})
	e, err := s.open(state, "alice", "db", "tools/call db_q")
	if err != nil || e.Park != "park-7f3a9c1e55" || e.Replica != "replica-b81d0e77" {
		t.Fatalf("open: %+v %v", e, err)
	}
	for name, c := range map[string]struct {
		sealer                  *stateSealer
		state, caller, srv, tgt string
		want                    string
	}{
		"other key":    {newStateSealer(strings.Repeat("x", 32)), state, "alice", "db", "tools/call db_q", "integrity"},
		"tampered":     {s, state + "-TAMPERED", "alice", "db", "tools/call db_q", "integrity"},
		"truncated":    {s, state[:len(state)-4], "alice", "db", "tools/call db_q", "integrity"},
		"no prefix":    {s, strings.TrimPrefix(state, statePrefix), "alice", "db", "tools/call db_q", "integrity"},
		"flipped":      {s, flipLast(state), "alice", "db", "tools/call db_q", "integrity"},
		"signed v1":    {s, signedV1(s, `{"v":1,"c":"alice","s":"db","t":"tools/call db_q","e":1900000000}`), "alice", "db", "tools/call db_q", "integrity"},
		"other caller": {s, state, "bob", "db", "tools/call db_q", "another caller"},
		"other server": {s, state, "alice", "web", "tools/call db_q", "another request"},
		"other tool":   {s, state, "alice", "db", "tools/call db_r", "another request"},
		"too long":     {s, strings.Repeat("a", maxStateLen+1), "alice", "db", "tools/call db_q", "longer"},
	} {
		if _, err := c.sealer.open(c.state, c.caller, c.srv, c.tgt); err == nil || !strings.Contains(err.Error(), c.want) {
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
	if again := s.seal(stateEnvelope{Caller: "alice", Server: "db", Target: "tools/call db_q", Park: "park-7f3a9c1e55", Replica: "replica-b81d0e77"}); again == state {
		t.Error("two seals of one envelope are equal: the nonce is not fresh")
	}
	// A state and a task id are sealed under different keys.
	if _, err := s.open(statePrefix+strings.TrimPrefix(s.sealTaskID("alice", "db", "x"), passTaskPrefix), "alice", "db", "tools/call db_q"); err == nil {
		t.Error("a task id opened as a requestState")
	}
	now = now.Add(stateTTL + time.Second)
	if _, err := s.open(state, "alice", "db", "tools/call db_q"); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired: %v", err)
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
func signedV1(s *stateSealer, envelope string) string {
	payload := base64.RawURLEncoding.EncodeToString([]byte(envelope))
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("mcp-mux requestState v1\x00"))
	m.Write([]byte(payload))
	return payload + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func FuzzStateOpen(f *testing.F) {
	s := newStateSealer("")
	f.Add(s.seal(stateEnvelope{Caller: "u", Server: "s", Target: "t"}))
	f.Add(signedV1(s, `{"v":1,"c":"u","s":"s","t":"t","e":9999999999}`))
	f.Add(statePrefix)
	f.Add(statePrefix + "AAAA")
	f.Add("a.b")
	f.Add("")
	f.Fuzz(func(t *testing.T, state string) {
		if e, err := s.open(state, "u", "s", "t"); err == nil && e.Caller != "u" {
			t.Fatalf("opened a state for %q", e.Caller)
		}
	})
}
