package inbound

import (
	"crypto/subtle"
	"net/http"
)

// PresentsToken reports whether r presents token (the admin token of the
// status page and /metrics) as its bearer token or as the password of HTTP
// Basic auth (how a browser and Prometheus's basic_auth send it), compared
// in constant time. An empty token is never presented.
func PresentsToken(r *http.Request, token string) bool {
	got, ok := bearer(r)
	if _, pw, basic := r.BasicAuth(); basic {
		got, ok = pw, true
	}
	return ok && token != "" && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}
