package proxy

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// requestState envelopes (2026-07-28 multi-round-trip requests).
//
// A requestState travels through the client, so mcp-mux never hands one out
// bare: it seals what it needs on the retry (the upstream's own state, or
// where a bridged call is parked) with the caller, the server and an
// expiry, under an HMAC-SHA256 key. A retry whose state fails the MAC, is
// past its expiry, or names another caller or server is refused. Replicas
// share the key through inbound.request_state_key; without one each process
// generates its own, so a state only works on the replica that minted it.

// stateEnvelope is the sealed content of a requestState.
type stateEnvelope struct {
	V       int    `json:"v"`
	Caller  string `json:"c"`           // user the state was minted for
	Server  string `json:"s"`           // server that serves the call
	Target  string `json:"t"`           // what was called: method and name or URI
	Expires int64  `json:"e"`           // unix seconds
	Park    string `json:"p,omitempty"` // id of a parked bridged call
	Replica string `json:"r,omitempty"` // replica holding the parked call
	State   string `json:"u,omitempty"` // the upstream's own requestState
}

// maxStateLen bounds a requestState a client sends back.
const maxStateLen = 64 << 10

// stateTTL is how long a requestState stays valid.
const stateTTL = 10 * time.Minute

// stateSealer seals and opens requestState envelopes.
type stateSealer struct {
	key []byte
	now func() time.Time
}

// newStateSealer uses key, or a fresh random key when key is empty.
func newStateSealer(key string) *stateSealer {
	k := []byte(key)
	if len(k) == 0 {
		k = make([]byte, 32)
		_, _ = rand.Read(k) // crypto/rand.Read never fails
	}
	return &stateSealer{key: k, now: time.Now}
}

func (s *stateSealer) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("mcp-mux requestState v1\x00"))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// seal returns the requestState for e, stamping its version and expiry.
func (s *stateSealer) seal(e stateEnvelope) string {
	e.V = 1
	e.Expires = s.now().Add(stateTTL).Unix()
	b, _ := json.Marshal(e) // plain strings and ints: cannot fail
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.mac(payload))
}

var errStateIntegrity = errors.New("requestState failed its integrity check (tampered, or minted under another key)")

// open verifies state and that it belongs to caller and continues a
// request to the same server and target.
func (s *stateSealer) open(state, caller, server, target string) (*stateEnvelope, error) {
	if len(state) > maxStateLen {
		return nil, fmt.Errorf("requestState longer than %d bytes", maxStateLen)
	}
	payload, sig, ok := strings.Cut(state, ".")
	if !ok {
		return nil, errStateIntegrity
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(payload)) {
		return nil, errStateIntegrity
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, errStateIntegrity
	}
	var e stateEnvelope
	if json.Unmarshal(b, &e) != nil || e.V != 1 {
		return nil, errStateIntegrity
	}
	switch {
	case s.now().Unix() > e.Expires:
		return nil, errors.New("requestState has expired; call again without it")
	case e.Caller != caller:
		return nil, errors.New("requestState was issued to another caller")
	case e.Server != server || e.Target != target:
		return nil, errors.New("requestState continues another request (another server, tool, prompt or resource)")
	}
	return &e, nil
}
