package secret

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
)

// idHashLabel derives an IDHash's key from its secret, so the key is never
// the secret itself nor a key package seal derives from the same secret.
const idHashLabel = "mcp-mux caller id hash v1\x00"

// IDHash identifies a user id without revealing it: "hmac:" and the hex of
// the first 12 bytes of its HMAC-SHA256 under a key. Without the key an
// id cannot be found by hashing guesses (a dictionary of user names or
// e-mail addresses); processes that share the key give one user one hash,
// so spans and audit records of a caller match across replicas. Spans
// (user.id) and audit records (caller) use the same IDHash. It is safe for
// concurrent use.
type IDHash struct {
	key []byte
}

// NewIDHash returns the IDHash keyed by HMAC-SHA256(secret, label); an
// empty secret gets a random key, so only this IDHash hashes as it does.
func NewIDHash(secret string) *IDHash {
	if secret == "" {
		k := make([]byte, 32)
		_, _ = rand.Read(k) // crypto/rand.Read never fails
		return &IDHash{key: k}
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(idHashLabel))
	return &IDHash{key: m.Sum(nil)}
}

// Of is id's hash. A nil IDHash has no key and shows no one: "".
func (h *IDHash) Of(id string) string {
	if h == nil {
		return ""
	}
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(id))
	return "hmac:" + hex.EncodeToString(m.Sum(nil)[:12])
}
