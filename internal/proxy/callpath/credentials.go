package callpath

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/internal/headers"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// credentialsStage resolves the upstream headers of a call to a server
// that has any (static < OAuth < token_exchange < user_auth <
// headers_from_context, package headers) for its caller, with the secrets
// the caller carried and, for token exchange, its inbound token. Headers
// that depend on the caller key the upstream session too (c.Key.Cred: a
// session opened with one caller's credentials is never used for
// another). An upstream's 401 renews them once (c.renew). A tools/call
// whose credentials are refused gets a tool error naming why; any other
// request an invalid-params error. Left out when no server has headers.
func credentialsStage(s *Router) Stage {
	return Stage{
		Name:    "credentials",
		Methods: AllMethods,
		Needed:  hasResolvers,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				res := c.Backend.Resolver
				if res == nil {
					return next(ctx, c)
				}
				err := c.resolveHeaders(ctx)
				if err == nil {
					c.renew = func(ctx context.Context) error {
						res.UnauthorizedHeader(c.upHeader)
						return c.resolveHeaders(ctx)
					}
					var raw json.RawMessage
					if raw, err = next(ctx, c); err == nil {
						return raw, nil
					}
				}
				return c.credentialsRefused(err)
			}
		},
	}
}

// hasResolvers reports whether a server of rt has upstream headers.
func hasResolvers(rt *Runtime) bool {
	for _, b := range rt.Backends {
		if b.Resolver != nil {
			return true
		}
	}
	return false
}

// resolveHeaders sets c's upstream headers and, when they depend on the
// caller, their fingerprint in c.Key.
func (c *Call) resolveHeaders(ctx context.Context) error {
	res := c.Backend.Resolver
	hdr, err := res.ForRequest(ctx, c.Caller.User, c.Caller.Secrets, c.Header)
	if err != nil {
		return err
	}
	c.upHeader, c.Key.Cred = hdr, ""
	if res.PerCaller() {
		c.Key.Cred = fingerprint(c.Caller.User, hdr)
	}
	return nil
}

// credentialsRefused is the caller's answer when c failed with err: a
// refusal of its credentials as the method gets it, anything else as is.
func (c *Call) credentialsRefused(err error) (json.RawMessage, error) {
	deny, denied := errors.AsType[*headers.DenyError](err)
	switch {
	case c.Method == "tools/call" && denied:
		// A credential denial is the caller's tool error; interceptors see it so too.
		c.Record.Deny("credentials: " + deny.Msg)
		return wire.ToolError(deny.Msg), nil
	case c.Method != "tools/call" && c.upHeader == nil:
		return nil, refusal{&jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}}
	}
	return nil, err
}

// fingerprint hashes a user and header set; it identifies, never reveals.
func fingerprint(user string, h http.Header) string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	d := sha256.New()
	d.Write([]byte(user))
	for _, k := range names {
		d.Write([]byte{0})
		d.Write([]byte(k))
		for _, v := range h[k] {
			d.Write([]byte{1})
			d.Write([]byte(v))
		}
	}
	return hex.EncodeToString(d.Sum(nil)[:12])
}
