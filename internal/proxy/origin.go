package proxy

import "net/http"

// The Host and Origin guard of every route. The policy it applies,
// originPolicy, is built from inbound.allowed_hosts and
// inbound.allowed_origins in auth.go, and its loopback rule, hostAllowed,
// is in fastpath.go.

// GuardHosts applies the DNS-rebinding and cross-origin checks of
// inbound.allowed_hosts and inbound.allowed_origins to every request of h.
// Handler is guarded already; serve wraps the listener's whole route mux
// (the task and admin APIs, the status page) with it too.
func (s *Server) GuardHosts(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every route passes here, so the body deadline starts here too (requests.go).
		s.bodies.Limit(w, r)
		if err := s.rt.Load().Origins.Check(r); err != nil {
			http.Error(w, "Forbidden: "+err.Error(), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
