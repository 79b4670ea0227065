// Package seal issues and opens every integrity-protected token mcp-mux
// hands to a client: the 2026-07-28 requestState envelope, the namespaced
// ids of passed-through tasks (mux-task-…), and generic sealed tokens bound
// to a caller (for session ids and the like). This file is the security
// boundary: a reviewer reads it alone.
//
// Every token is prefix || base64url(nonce || AES-256-GCM(payload) || tag),
// with the prefix as associated data. Each purpose seals under its own key,
// HMAC-SHA256(secret, label), so a token of one purpose never opens as
// another's. The client can neither read nor alter a token; one that fails
// to open (tampered, of the older signed-only requestState format, or
// minted under another secret), is past its expiry, or names another caller
// is refused. Replicas share the secret (inbound.request_state_key); without
// one each process generates its own, so its tokens open on that process
// only.
package seal

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
	"sync/atomic"
	"time"
)

// Formats and key derivation labels. Changing any of them invalidates every
// token already issued.
const (
	// statePrefix marks the sealed requestState format (version 2); it is
	// also its associated data. Version 1 was signed JSON, readable by anyone.
	statePrefix  = "s2."
	stateVersion = 2
	stateLabel   = "mcp-mux requestState v2 aead"
	// TaskIDPrefix starts a passed-through task's namespaced id; it is also
	// its associated data.
	TaskIDPrefix = "mux-task-"
	taskLabel    = "mcp-mux task id v1"
	// tokenLabel namespaces the labels of generic tokens' purposes, so that
	// none derives the key of a requestState or a task id.
	tokenLabel = "mcp-mux token v1\x00"
	// macLabel is the keyed hash's label (that of the retired signed
	// requestStates).
	macLabel = "mcp-mux requestState v1\x00"
)

// MaxStateLen bounds a requestState a client sends back.
const MaxStateLen = 64 << 10

// StateTTL is how long a requestState stays valid.
const StateTTL = 10 * time.Minute

// ErrIntegrity is a token that does not open: tampered, truncated, of an
// older format, or minted under another secret or for another purpose.
var ErrIntegrity = errors.New("failed its integrity check (tampered, of an older format, or minted under another key)")

// Sealer seals and opens tokens, each purpose under its own key derived
// from one secret. It is safe for concurrent use.
type Sealer struct {
	keys atomic.Pointer[keyring]
	mac  []byte           // MAC's key: the secret s was made with
	now  func() time.Time // the clock expiries are stamped and checked by
}

// keyring is one secret and the keys derived from it, with the keyring
// it replaced (Rekey), whose requestStates and task ids still open.
type keyring struct {
	key   []byte
	state cipher.AEAD // requestStates
	tasks cipher.AEAD // namespaced task ids
	prev  *keyring
}

func newKeyring(k []byte) *keyring {
	return &keyring{key: k, state: deriveAEAD(k, stateLabel), tasks: deriveAEAD(k, taskLabel)}
}

// New returns a Sealer under key, or under a fresh random key when key is
// empty.
func New(key string) *Sealer {
	k := []byte(key)
	if len(k) == 0 {
		k = make([]byte, 32)
		_, _ = rand.Read(k) // crypto/rand.Read never fails
	}
	s := &Sealer{mac: k, now: time.Now}
	s.keys.Store(newKeyring(k))
	return s
}

// Rekey makes key the secret s seals requestStates and task ids under
// from now on (the replicas sharing a secret adopted another); those
// sealed under the secret it replaces still open, those of earlier ones
// no longer. An empty key changes nothing, and so does the current one;
// MAC and the Purposes made before keep their secret.
func (s *Sealer) Rekey(key string) {
	if key == "" {
		return
	}
	for {
		cur := s.keys.Load()
		if string(cur.key) == key {
			return
		}
		next := newKeyring([]byte(key))
		next.prev = &keyring{key: cur.key, state: cur.state, tasks: cur.tasks}
		if s.keys.CompareAndSwap(cur, next) {
			return
		}
	}
}

// open opens a token sealed by sealText under the current secret or the
// one before it; aead picks the purpose's key of a keyring.
func (s *Sealer) open(aead func(*keyring) cipher.AEAD, prefix, sealed string) ([]byte, bool) {
	for k := s.keys.Load(); k != nil; k = k.prev {
		if pt, ok := openText(aead(k), prefix, sealed); ok {
			return pt, true
		}
	}
	return nil, false
}

func stateKey(k *keyring) cipher.AEAD { return k.state }
func taskKey(k *keyring) cipher.AEAD  { return k.tasks }

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

// sealText is prefix || base64url(sealBox(pt)), the prefix bound as ad.
func sealText(a cipher.AEAD, prefix string, pt []byte) string {
	return prefix + base64.RawURLEncoding.EncodeToString(sealBox(a, pt, []byte(prefix)))
}

// openText reverses sealText for the part of a token after its prefix.
func openText(a cipher.AEAD, prefix, sealed string) ([]byte, bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(sealed)
	if err != nil {
		return nil, false
	}
	return openBox(a, b, []byte(prefix))
}

// MAC is a keyed hash of payload under the secret s was made with (proxy
// derives its replica id from the process's own random key with it).
func (s *Sealer) MAC(payload string) []byte {
	m := hmac.New(sha256.New, s.mac)
	m.Write([]byte(macLabel))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// State is the sealed content of a requestState (2026-07-28 multi-round-trip
// requests): what mcp-mux needs on the client's retry, bound to the caller,
// the server and the target. Park, Replica and Upstream are carried, not
// checked.
type State struct {
	V        int    `json:"v"`
	Caller   string `json:"c"`           // user the state was minted for
	Server   string `json:"s"`           // server that serves the call
	Target   string `json:"t"`           // what was called: method and name or URI
	Expires  int64  `json:"e"`           // unix seconds
	Park     string `json:"p,omitempty"` // id of a parked bridged call
	Replica  string `json:"r,omitempty"` // replica holding the parked call
	Upstream string `json:"u,omitempty"` // the upstream's own requestState
}

// SealState returns the requestState for e, stamping its version and
// expiry (StateTTL from now).
func (s *Sealer) SealState(e State) string {
	e.V = stateVersion
	e.Expires = s.now().Add(StateTTL).Unix()
	b, _ := json.Marshal(e) // plain strings and ints: cannot fail
	return sealText(s.keys.Load().state, statePrefix, b)
}

// OpenState verifies state and that it belongs to caller and continues a
// request to the same server and target.
func (s *Sealer) OpenState(state, caller, server, target string) (*State, error) {
	if len(state) > MaxStateLen {
		return nil, fmt.Errorf("requestState longer than %d bytes", MaxStateLen)
	}
	e, err := s.unsealState(state)
	if err != nil {
		return nil, err
	}
	switch {
	case s.now().Unix() > e.Expires:
		return nil, errors.New("requestState has expired; call again without it")
	case e.Caller != caller:
		return nil, errors.New("requestState was issued to another caller")
	case e.Server != server || e.Target != target:
		return nil, errors.New("requestState continues another request (another server, tool, prompt or resource)")
	}
	return e, nil
}

// ParkedAt returns the parked call a requestState continues and the
// replica holding it ("" and false for a state that does not open or
// names none), checking nothing else: the replica that holds the call
// opens the state with OpenState.
func (s *Sealer) ParkedAt(state string) (park, replica string, ok bool) {
	if len(state) > MaxStateLen {
		return "", "", false
	}
	e, err := s.unsealState(state)
	if err != nil || e.Park == "" {
		return "", "", false
	}
	return e.Park, e.Replica, true
}

// unsealState decrypts a requestState of the current version, checking
// nothing of its content.
func (s *Sealer) unsealState(state string) (*State, error) {
	sealed, ok := strings.CutPrefix(state, statePrefix)
	if !ok {
		return nil, fmt.Errorf("requestState %w", ErrIntegrity)
	}
	pt, ok := s.open(stateKey, statePrefix, sealed)
	if !ok {
		return nil, fmt.Errorf("requestState %w", ErrIntegrity)
	}
	var e State
	if json.Unmarshal(pt, &e) != nil || e.V != stateVersion {
		return nil, fmt.Errorf("requestState %w", ErrIntegrity)
	}
	return &e, nil
}

// taskRef is the sealed content of a passed-through task's id.
type taskRef struct {
	User   string `json:"c"`
	Server string `json:"s"`
	Remote string `json:"r"`
}

// SealTaskID returns the namespaced id of server's task remote for user:
// opaque (it shows neither the server nor the remote id), tamper-proof, and
// opened by every Sealer under the same secret.
func (s *Sealer) SealTaskID(user, server, remote string) string {
	pt, _ := json.Marshal(taskRef{User: user, Server: server, Remote: remote})
	return sealText(s.keys.Load().tasks, TaskIDPrefix, pt)
}

// OpenTaskID returns the server and remote id of a namespaced task id, if
// it is intact and belongs to user.
func (s *Sealer) OpenTaskID(id, user string) (server, remote string, ok bool) {
	pt, ok := s.open(taskKey, TaskIDPrefix, strings.TrimPrefix(id, TaskIDPrefix))
	if !ok {
		return "", "", false
	}
	var ref taskRef
	if json.Unmarshal(pt, &ref) != nil || ref.User != user || ref.Server == "" || ref.Remote == "" {
		return "", "", false
	}
	return ref.Server, ref.Remote, true
}

// Purpose seals and opens the generic tokens of one kind: its own key,
// derived once by Sealer.Purpose, and the prefix that starts its tokens.
// It is safe for concurrent use.
type Purpose struct {
	s      *Sealer // its clock
	prefix string
	aead   cipher.AEAD
}

// Purpose returns the purpose of generic tokens that start with prefix,
// keyed under tokenLabel || label (distinct purposes need distinct labels;
// the namespace keeps every label from deriving a requestState's or a task
// id's key). It derives the key: call it once per purpose and keep it.
func (s *Sealer) Purpose(label, prefix string) *Purpose {
	return &Purpose{s: s, prefix: prefix, aead: deriveAEAD(s.keys.Load().key, tokenLabel+label)}
}

// token is the sealed content of a generic token.
type token struct {
	Caller  string `json:"c"`
	Expires int64  `json:"e,omitempty"` // unix seconds; 0: never
	Data    []byte `json:"d,omitempty"`
}

// Seal returns an unguessable token of purpose p carrying data for caller,
// valid for ttl (forever when ttl <= 0). Two tokens of the same content
// differ.
func (p *Purpose) Seal(caller string, data []byte, ttl time.Duration) string {
	t := token{Caller: caller, Data: data}
	if ttl > 0 {
		t.Expires = p.s.now().Add(ttl).Unix()
	}
	pt, _ := json.Marshal(t) // a string, an int and bytes: cannot fail
	return sealText(p.aead, p.prefix, pt)
}

// Open returns the data of a token of purpose p, if it is intact, unexpired
// and was sealed for caller.
func (p *Purpose) Open(tok, caller string) ([]byte, error) {
	sealed, ok := strings.CutPrefix(tok, p.prefix)
	if !ok || len(tok) > MaxStateLen {
		return nil, fmt.Errorf("token %w", ErrIntegrity)
	}
	pt, ok := openText(p.aead, p.prefix, sealed)
	var t token
	if !ok || json.Unmarshal(pt, &t) != nil {
		return nil, fmt.Errorf("token %w", ErrIntegrity)
	}
	switch {
	case t.Expires != 0 && p.s.now().Unix() > t.Expires:
		return nil, errors.New("token has expired")
	case t.Caller != caller:
		return nil, errors.New("token was issued to another caller")
	}
	return t.Data, nil
}
