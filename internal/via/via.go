// Package via keeps mcp-mux out of request loops. Every request mcp-mux
// sends upstream carries the Mcp-Mux-Via header: the ids of the mcp-mux
// processes the request has passed through, oldest first, ending with the
// sender's own. An inbound request whose header names this process, or
// names MaxHops processes already, is refused, so an upstream URL that
// leads back to the mux (directly, or through other muxes) costs one
// refused request instead of an unbounded recursion.
//
// An id is random per process and tells nothing about the host; the
// header is not a secret but is never logged.
package via

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Header is the HTTP header that carries the chain.
const Header = "Mcp-Mux-Via"

// MaxHops is how many mcp-mux processes a request may have passed through
// before it reaches one more: a request that names MaxHops already is
// refused.
const MaxHops = 8

// maxHeader bounds the header: MaxHops ids, separators and slack.
const maxHeader = 512

// ErrLoop is a request that already passed through this process.
var ErrLoop = errors.New("request loop: this request already passed through this mcp-mux (" + Header + " names it); an upstream url points back at it")

// ErrTooManyHops is a request that passed through MaxHops muxes already.
var ErrTooManyHops = fmt.Errorf("request loop: this request already passed through %d mcp-mux instances (%s), the bound on chained muxes", MaxHops, Header)

// ErrMalformed is a header that is not a chain of ids.
var ErrMalformed = errors.New("malformed " + Header + " header: a comma-separated list of at most " + fmt.Sprint(MaxHops) + " mcp-mux ids")

// Marker marks outbound requests with this process's id and checks
// inbound ones for it. The zero value is not usable; use New.
type Marker struct{ id string }

// New returns a Marker with a fresh random id.
func New() *Marker {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return &Marker{id: hex.EncodeToString(b[:])}
}

// ID returns this process's id.
func (m *Marker) ID() string { return m.id }

// Check returns the chain an inbound request's header carries (nil when it
// has none), or ErrLoop, ErrTooManyHops or ErrMalformed.
func (m *Marker) Check(h http.Header) ([]string, error) {
	vals := h.Values(Header)
	if len(vals) == 0 {
		return nil, nil
	}
	n := 0
	for _, v := range vals {
		n += len(v) + 1
	}
	if n > maxHeader {
		return nil, ErrMalformed
	}
	var chain []string
	for _, v := range vals {
		for id := range strings.SplitSeq(v, ",") {
			id = strings.TrimSpace(id)
			if !validID(id) {
				return nil, ErrMalformed
			}
			if id == m.id {
				return nil, ErrLoop
			}
			chain = append(chain, id)
		}
	}
	if len(chain) >= MaxHops {
		return nil, ErrTooManyHops
	}
	return chain, nil
}

// idChars are the bytes an id may hold.
const idChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"

// validID accepts 1 to 64 ASCII letters, digits, '-' and '_'.
func validID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(idChars, s[i]) < 0 {
			return false
		}
	}
	return true
}

// chainKey is the context key of the chain With stores.
type chainKey struct{}

// With returns ctx carrying an inbound request's chain (from Check), which
// the requests made on ctx's behalf extend.
func With(ctx context.Context, chain []string) context.Context {
	if len(chain) == 0 {
		return ctx
	}
	return context.WithValue(ctx, chainKey{}, chain)
}

// From returns the chain ctx carries, or nil.
func From(ctx context.Context) []string {
	c, _ := ctx.Value(chainKey{}).([]string)
	return c
}

// Transport returns base with every request marked: the chain of the
// request's context followed by this process's id.
func (m *Marker) Transport(base http.RoundTripper) http.RoundTripper {
	return transport{base: base, m: m}
}

// transport is Marker.Transport's RoundTripper.
type transport struct {
	base http.RoundTripper
	m    *Marker
}

// RoundTrip sends a copy of r marked with the chain and this process's id.
func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	v := t.m.id
	if chain := From(r.Context()); len(chain) > 0 {
		v = strings.Join(chain, ",") + "," + v
	}
	r = r.Clone(r.Context()) // a RoundTripper must not modify the caller's request
	r.Header.Set(Header, v)
	return t.base.RoundTrip(r)
}
