package config

import (
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// selfProblem returns the problem of a server whose url is the mux's own
// listener (LoadOptions.Listen, host:port as bound), or nil. A call to such
// a server would come back to the mux; the runtime refuses that request
// (the Mcp-Mux-Via header), but the url is wrong from the start. Names are
// matched without DNS: the listener's own address and the loopback
// aliases (localhost, 127.0.0.1, ::1, 0.0.0.0, ::) of a loopback or
// unspecified listener; other spellings are left to the runtime check.
func selfProblem(s *Server, listen string) *Problem {
	if listen == "" || (s.Type != TypeHTTP && s.Type != TypeSSE) {
		return nil
	}
	lhost, lport, err := net.SplitHostPort(listen)
	if err != nil {
		return nil
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return nil
	}
	if urlPort(u) != lport || !sameHost(u.Hostname(), lhost) {
		return nil
	}
	return &Problem{Server: s.Name, Field: "url", Message: "points at this mcp-mux's own listener (" + listen + "): its calls would come back to the mux; point it at the upstream server instead"}
}

// urlPort is u's port, or its scheme's default one.
func urlPort(u *url.URL) string {
	if port := u.Port(); port != "" {
		return port
	}
	return map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
}

// selfProblems returns selfProblem's problem as a list (nil when none).
func selfProblems(s *Server, listen string) []Problem {
	if p := selfProblem(s, listen); p != nil {
		return []Problem{*p}
	}
	return nil
}

// sameHost reports whether a url's host reaches a listener bound to lhost.
func sameHost(host, lhost string) bool {
	if strings.EqualFold(host, lhost) {
		return true
	}
	la, lerr := netip.ParseAddr(lhost)
	if lhost == "" || lerr == nil && (la.IsUnspecified() || la.IsLoopback()) {
		return isLoopbackName(host)
	}
	a, err := netip.ParseAddr(host)
	return err == nil && lerr == nil && a.Unmap() == la.Unmap()
}

// isLoopbackName reports whether host names this machine without DNS.
func isLoopbackName(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && (a.Unmap().IsLoopback() || a.IsUnspecified())
}
