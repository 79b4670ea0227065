package proxy

import (
	"slices"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/interceptor"
	"github.com/mcp-mux/mcp-mux/internal/proxy/sessions"
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
func SweepSessionsForTest(s *Server, now time.Time) { s.sessions.Sweep(now) }

// HoldSessionCreatesForTest makes every new session's creation (its
// initialize admitted past the body checks, before its record is admitted
// by the store) call hold first. Set it before the first initialize.
func HoldSessionCreatesForTest(s *Server, hold func()) {
	s.sessions.SetHooks(sessions.Hooks{BeforeCreate: hold})
}

// HoldSessionLoadsForTest makes every first load of a session's record
// on s call hold with its id once the record was read, before the session
// is registered.
func HoldSessionLoadsForTest(s *Server, hold func(id string)) {
	s.sessions.SetHooks(sessions.Hooks{AfterRead: hold})
}

// SessionHasThreadForTest reports whether s knows that its session id
// called upstreams as thread (nil session: false).
func SessionHasThreadForTest(s *Server, id, thread string) bool {
	st := s.sessions.Get(id)
	return st != nil && st.HasThread(thread)
}
