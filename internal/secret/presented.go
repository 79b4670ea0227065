package secret

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// Presented reports whether r presents token, as a bearer token or as the
// password of HTTP Basic auth (how a browser and Prometheus's basic_auth
// send it), compared in constant time. An empty token is never presented.
func Presented(r *http.Request, token string) bool {
	got := ""
	if _, pw, ok := r.BasicAuth(); ok {
		got = pw
	} else if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		got = strings.TrimSpace(v)
	}
	return token != "" && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}
