package callpath

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/headers"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// callHeaders resolves the upstream headers of one call to b by user, with
// the secrets and the token for token_exchange carried on the request's
// headers h, and a fingerprint of them
// for the session key when they depend on the caller (sessions opened with
// one caller's credentials are never used for another).
func (s *Router) callHeaders(ctx context.Context, b *Backend, user string, h http.Header) (http.Header, string, error) {
	if b.Resolver == nil {
		return nil, "", nil
	}
	var secrets map[string]string
	if name := s.rt.Load().Config.Inbound.SecretsHeader; name != "" && h != nil {
		if v := h.Get(name); v != "" {
			var err error
			if secrets, err = headers.ParseSecrets(name, v); err != nil {
				return nil, "", &headers.DenyError{Msg: err.Error()}
			}
		}
	}
	out, err := b.Resolver.ForRequest(ctx, user, secrets, h)
	if err != nil || !b.Resolver.PerCaller() {
		return out, "", err
	}
	return out, fingerprint(user, out), nil
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

// forwardCall sends a tools/call upstream with the caller's headers. An
// upstream's 401 makes the resolver refresh its OAuth token, and the call is
// retried once with the new headers.
func (s *Router) forwardCall(ctx context.Context, st *Session, k Sink, key upstream.Key, h http.Header, r *Route, params json.RawMessage) (raw json.RawMessage, err error) {
	b := r.Server
	start := time.Now()
	defer func() { b.Metrics.record(ctx, start, err) }()
	for attempt := 0; ; attempt++ {
		hdr, cred, herr := s.callHeaders(ctx, b, st.User, h)
		if herr != nil {
			return nil, herr
		}
		key.Cred = cred
		raw, err = b.Up.CallTool(WithSink(ctx, k), key, params, hdr)
		var se *upstream.StatusError
		if attempt == 0 && errors.As(err, &se) && se.Code == http.StatusUnauthorized && b.Resolver != nil {
			b.Resolver.UnauthorizedHeader(hdr)
			continue
		}
		return raw, err
	}
}
