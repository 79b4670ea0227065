package secret

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// An id's hash is keyed: the same under the same secret (replicas that
// share one agree), another under another secret or a random key, and
// not the plain SHA-256 a dictionary of guessed ids would find.
func TestIDHash(t *testing.T) {
	const secret = "shared-request-state-key-0123456789abcdef"
	a, b := NewIDHash(secret), NewIDHash(secret)
	h := a.Of("alice")
	if !strings.HasPrefix(h, "hmac:") || len(h) != len("hmac:")+24 || strings.Contains(h, "alice") {
		t.Fatalf("Of = %q", h)
	}
	if b.Of("alice") != h || a.Of("bob") == h {
		t.Errorf("the same secret gives %q and %q; bob gets %q", h, b.Of("alice"), a.Of("bob"))
	}
	sum := sha256.Sum256([]byte("alice"))
	if strings.Contains(h, hex.EncodeToString(sum[:12])) {
		t.Errorf("%q is alice's unkeyed SHA-256", h)
	}
	for name, o := range map[string]*IDHash{"another secret": NewIDHash(secret + "x"), "a random key": NewIDHash(""), "another random key": NewIDHash("")} {
		if o.Of("alice") == h {
			t.Errorf("%s hashes alice as the shared secret does", name)
		}
	}
	if r := NewIDHash(""); r.Of("alice") != r.Of("alice") {
		t.Error("a random key hashes one id two ways")
	}
	var none *IDHash
	if none.Of("alice") != "" {
		t.Error("a nil IDHash shows a caller")
	}
}
