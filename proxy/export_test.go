package proxy

import (
	"net/http"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/interceptor"
	"github.com/mcp-mux/mcp-mux/proxy/callpath"
)

// AddInterceptorForTest appends ic to the running runtime's interceptors,
// as a config's mcpInterceptors would place a compiled-in one last. The
// runtime is published again, so calls that start later see it.
func AddInterceptorForTest(s *Server, ic interceptor.Interceptor) {
	rt := s.rt.Load()
	rt.Interceptors = append(slices.Clip(rt.Interceptors), ic)
	s.rt.Store(rt)
}

// PanicsForTest is the number of panics s recovered (mcp_mux_panics_total,
// every where).
func PanicsForTest(s *Server) float64 {
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		panic(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "mcp_mux_panics_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// SetParkTTLForTest sets how long s keeps a bridged call parked for its
// client's retry (stateTTL otherwise).
func SetParkTTLForTest(s *Server, d time.Duration) {
	s.modern.SetParkTTL(d)
}

// SweepSessionsForTest runs the session reaper's sweep as at now.
func SweepSessionsForTest(s *Server, now time.Time) { s.sessions.sweep(now) }

// HoldSessionOpensForTest makes every open of a downstream session (after
// its initialize succeeded, before it is registered and counted) call hold
// first. Set it before the first initialize.
func HoldSessionOpensForTest(s *Server, hold func(ss *mcp.ServerSession)) {
	s.sessions.beforeOpen.Store(&hold)
}

// OpenSessionForTest opens ss for the caller of auth mode none, as a
// successful initialize would, without an admission slot: a second open of
// a session.
func OpenSessionForTest(s *Server, ss *mcp.ServerSession) {
	s.sessions.open(ss, callpath.User(http.Header{}), "")
}
