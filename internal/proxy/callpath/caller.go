package callpath

import (
	"context"
)

// Caller is who makes a request, resolved once where it is authenticated
// (package proxy's authenticate) and carried on the request's context:
// never in a header, so nothing a client sends can pose as it.
type Caller struct {
	User    string            // the authenticated user ("default" when none is named)
	Profile string            // the profile it is served under ("" = every tool)
	Secrets map[string]string // the secrets it carried (inbound.secrets_header), parsed once; nil: none
}

// NewCaller is the caller user under profile; a request no authentication
// named is the user "default".
func NewCaller(user, profile string) Caller {
	if user == "" {
		user = defaultUser
	}
	return Caller{User: user, Profile: profile}
}

// defaultUser is the user of a request no authentication named.
const defaultUser = "default"

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf returns the caller ctx carries, and whether it carries one.
func CallerOf(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// CallerFrom returns the caller ctx carries, or the default user's.
func CallerFrom(ctx context.Context) Caller {
	if c, ok := CallerOf(ctx); ok {
		return c
	}
	return NewCaller("", "")
}

// callerOf is the caller of a request of st handled with ctx: the one
// authentication put on ctx or, for a request that did not come through
// it (a durable task's poll, a test), the session's own.
func callerOf(ctx context.Context, st *Session) Caller {
	if c, ok := CallerOf(ctx); ok {
		return c
	}
	return Caller{User: st.User, Profile: st.Profile}
}
