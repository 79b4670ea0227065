package inbound

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
)

// FuzzIdentity: whatever a verified token's payload holds, the identity
// read from it has a user of at most bounds.User printable bytes that is
// the user claim's string value, a profile claim typed as it was sent, or
// an authentication failure of bounded length.
func FuzzIdentity(f *testing.F) {
	f.Add(`{"sub":"alice","grp":"support"}`, "sub", "grp")
	f.Add(`{"sub":["alice"],"grp":7}`, "sub", "grp")
	f.Add(`{"sub":"a\u0000","grp":null}`, "sub", "grp")
	f.Add(`{"sub":"alice","grp":{"p":"support"}}`, "sub", "grp")
	f.Add(`{"sub":"","grp":""}`, "sub", "grp")
	f.Add(`{"email":"`+string(make([]byte, 300))+`"}`, "email", "")
	f.Fuzz(func(t *testing.T, payload, userClaim, profileClaim string) {
		var all map[string]any
		if userClaim == "" || json.Unmarshal([]byte(payload), &all) != nil {
			return
		}
		a := &Authenticator{opts: Options{UserClaim: userClaim, ProfileClaim: profileClaim}}
		id, err := a.identity(all)
		if err != nil {
			// The claim name is the operator's, quoted: up to 4 bytes a byte.
			if !errors.Is(err, ErrUnauthenticated) || len(err.Error()) > 200+4*len(userClaim) {
				t.Fatalf("error %q: want a bounded authentication failure", err)
			}
			return
		}
		if u, _ := all[userClaim].(string); id.User != u || id.User == "" || bounds.Printable("user", id.User, bounds.User) != nil {
			t.Fatalf("user %q from claim %v", id.User, all[userClaim])
		}
		v, has := all[profileClaim]
		s, isString := v.(string)
		switch {
		case profileClaim == "" || !has:
			if id.ClaimType != "" || id.Claim != "" {
				t.Fatalf("no profile claim, identity %+v", id)
			}
		case (id.ClaimType == "string") != isString || id.Claim != s || id.ClaimType == "":
			t.Fatalf("profile claim %v: identity %+v", v, id)
		}
	})
}
