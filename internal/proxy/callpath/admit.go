package callpath

import (
	"context"
	"encoding/json"
)

// sessionStage admits the call on its session and pins its runtime: it is
// refused while mcp-mux shuts down (ErrClosing) or when the session has
// as many requests in flight as it may (admission.Calls), is cancelled
// with the session, and finishes on the runtime it started on — with the
// caller's profile's view of its catalog — whatever a reload does
// meanwhile. What it takes it gives back however the call ends.
func (s *Router) sessionStage() Stage {
	return Stage{
		Name:    "session",
		Methods: AllMethods,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				if !s.life.Begin() {
					return nil, ErrClosing
				}
				defer s.life.Done()
				ctx, done, err := s.Admit(ctx, c.Session)
				if err != nil {
					return nil, err
				}
				defer done()
				rt := s.pin(c.Runtime)
				defer rt.leave()
				if rt != c.Runtime {
					c.Runtime, c.Route = rt, nil // a route the edge found belongs to a retired runtime
				}
				c.View = c.Runtime.View(c.Caller.Profile)
				return next(ctx, c)
			}
		},
	}
}

// pin registers a call on rt, the runtime its pipeline was assembled
// from, or on the current runtime when a reload retired rt meanwhile;
// the caller calls leave on the one returned.
func (s *Router) pin(rt *Runtime) *Runtime {
	if rt != nil && rt.enter() {
		return rt
	}
	return s.enter()
}

// ViewOf is profile's view of cat: the one place a caller's profile
// selects what it sees.
func ViewOf(cat *Catalog, profile string) *Catalog {
	return cat.For(profile)
}

// View is profile's view of rt's current catalog.
func (rt *Runtime) View(profile string) *Catalog {
	return ViewOf(rt.Catalog.Load(), profile)
}

// Admit starts one request of the session st (admission.Calls.Admit).
func (s *Router) Admit(ctx context.Context, st *Session) (context.Context, func(), error) {
	return st.inflight.Admit(ctx, s.maxCalls)
}
