package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// The Host and Origin guard of every route: GuardHosts applies the
// runtime's originPolicy, built from inbound.allowed_hosts and
// inbound.allowed_origins, with the SDK's loopback rule (hostAllowed) when
// no hosts are listed.

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

// originPolicy is the DNS-rebinding and cross-origin guard of /mcp, for the
// fast path and the SDK alike: without inbound.allowed_hosts a request that
// reached a loopback address must name a loopback host (the SDK's rule);
// with it, the Host header must be one of them. And
// browser requests from another origin are refused unless listed in
// inbound.allowed_origins (net/http's CrossOriginProtection).
type originPolicy struct {
	hosts map[string]bool // lower-case host[:port] and bare host; empty = any
	cop   *http.CrossOriginProtection
}

func newOriginPolicy(hosts, origins []string) (*originPolicy, error) {
	p := &originPolicy{cop: http.NewCrossOriginProtection()}
	for _, o := range origins {
		if err := p.cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("inbound.allowed_origins: %w", err)
		}
	}
	if len(hosts) > 0 {
		p.hosts = make(map[string]bool, len(hosts))
		for _, h := range hosts {
			p.hosts[strings.ToLower(h)] = true
		}
	}
	return p, nil
}

// Check returns why r is refused by the policy, or nil.
func (p *originPolicy) Check(r *http.Request) error {
	if p.hosts == nil {
		// The SDK's rule: a request that reached a loopback address must name
		// a loopback host (DNS rebinding).
		if !hostAllowed(r) {
			return fmt.Errorf("invalid Host header %q", r.Host)
		}
	} else {
		host := strings.ToLower(r.Host)
		bare := host
		if h, _, err := net.SplitHostPort(host); err == nil {
			bare = h
		}
		if !p.hosts[host] && !p.hosts[bare] {
			return fmt.Errorf("host %q is not in inbound.allowed_hosts", r.Host)
		}
	}
	if err := p.cop.Check(r); err != nil {
		return errors.New("cross-origin request refused (see inbound.allowed_origins)")
	}
	return nil
}

// hostAllowed mirrors the SDK's DNS-rebinding protection: a request that
// reached a loopback address must name a loopback host.
func hostAllowed(r *http.Request) bool {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || la == nil || !isLoopback(la.String()) {
		return true
	}
	return isLoopback(r.Host)
}
