package proxy

import (
	"crypto/aes"
	"crypto/cipher"
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
// expiry, with AES-256-GCM under a key derived from the requestState key,
// so the client can neither read nor alter it. A retry whose state fails to
// open (tampered, of the older signed-only format, or minted under another
// key), is past its expiry, or names another caller or server is refused.
// Replicas share the key through inbound.request_state_key; without one each
// process generates its own, so a state only works on the replica that
// minted it.

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

// statePrefix marks the sealed format (version 2); it is also the sealed
// state's associated data. Version 1 was signed JSON, readable by anyone.
const (
	statePrefix  = "s2."
	stateVersion = 2
	stateLabel   = "mcp-mux requestState v2 aead" // key derivation label
	taskLabel    = "mcp-mux task id v1"           // of namespaced task ids (modern_tasks.go)
)

// stateSealer seals and opens requestState envelopes and namespaced task
// ids, each under its own key derived from one secret.
type stateSealer struct {
	key   []byte
	state cipher.AEAD // requestStates
	tasks cipher.AEAD // namespaced task ids (modern_tasks.go)
	now   func() time.Time
}

// newStateSealer uses key, or a fresh random key when key is empty.
func newStateSealer(key string) *stateSealer {
	k := []byte(key)
	if len(k) == 0 {
		k = make([]byte, 32)
		_, _ = rand.Read(k) // crypto/rand.Read never fails
	}
	return &stateSealer{key: k, state: deriveAEAD(k, stateLabel), tasks: deriveAEAD(k, taskLabel), now: time.Now}
}

// deriveAEAD is AES-256-GCM under HMAC-SHA256(key, label): one key per
// purpose, none usable for another.
func deriveAEAD(key []byte, label string) cipher.AEAD {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	blk, _ := aes.NewCipher(m.Sum(nil)) // 32 bytes: AES-256, cannot fail
	a, _ := cipher.NewGCM(blk)          // standard nonce and tag: cannot fail
	return a
}

// sealBox encrypts pt under a with a fresh random nonce, binding ad:
// nonce || ciphertext || tag.
func sealBox(a cipher.AEAD, pt, ad []byte) []byte {
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(pt)+a.Overhead())
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails
	return a.Seal(nonce, nonce, pt, ad)
}

// openBox reverses sealBox; false when b is short, altered, or sealed under
// another key or ad.
func openBox(a cipher.AEAD, b, ad []byte) ([]byte, bool) {
	if len(b) < a.NonceSize()+a.Overhead() {
		return nil, false
	}
	pt, err := a.Open(nil, b[:a.NonceSize()], b[a.NonceSize():], ad)
	return pt, err == nil
}

// mac is a keyed hash of payload (server.go derives the replica id from
// the process's own random key with it).
func (s *stateSealer) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("mcp-mux requestState v1\x00"))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// seal returns the requestState for e, stamping its version and expiry.
func (s *stateSealer) seal(e stateEnvelope) string {
	e.V = stateVersion
	e.Expires = s.now().Add(stateTTL).Unix()
	b, _ := json.Marshal(e) // plain strings and ints: cannot fail
	return statePrefix + base64.RawURLEncoding.EncodeToString(sealBox(s.state, b, []byte(statePrefix)))
}

var errStateIntegrity = errors.New("requestState failed its integrity check (tampered, of an older format, or minted under another key)")

// open verifies state and that it belongs to caller and continues a
// request to the same server and target.
func (s *stateSealer) open(state, caller, server, target string) (*stateEnvelope, error) {
	if len(state) > maxStateLen {
		return nil, fmt.Errorf("requestState longer than %d bytes", maxStateLen)
	}
	sealed, ok := strings.CutPrefix(state, statePrefix)
	if !ok {
		return nil, errStateIntegrity
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(sealed)
	if err != nil {
		return nil, errStateIntegrity
	}
	pt, ok := openBox(s.state, b, []byte(statePrefix))
	if !ok {
		return nil, errStateIntegrity
	}
	var e stateEnvelope
	if json.Unmarshal(pt, &e) != nil || e.V != stateVersion {
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
