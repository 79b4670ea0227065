// Package profile selects the profile (config "profiles") a request's
// caller is served under: the named view of the catalog it sees and may
// call.
//
// The profile a caller's identity maps to (inbound.profile_by: its api
// key's name, a JWT claim, a trusted header; else inbound.default_profile)
// binds it: a path /mcp/{profile} naming another profile is refused, so a
// caller cannot leave its profile by choosing a URL. An identity that
// names a profile badly — a claim that is not a string, a claim or header
// that is empty, sent twice, past bounds.Profile or naming no configured
// profile, an api key mapped to "" — is refused too (403): selection fails
// closed, never to "no profile". A caller its identity maps to no profile
// (no claim, no header, a key not in profile_by; and no default_profile)
// may see every tool, and /mcp/{profile} narrows it to that profile. With
// no profiles configured nothing is selected and every request sees every
// tool.
package profile

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/inbound"
)

// Errors of Select; each is wrapped with what was asked for.
var (
	// ErrUnknown: the path names no profile (HTTP 404).
	ErrUnknown = errors.New("unknown profile")
	// ErrForbidden: the caller's identity binds it to another profile
	// than the path names, or to one that does not exist (HTTP 403).
	ErrForbidden = errors.New("profile not allowed for this caller")
)

// Selector is the profile selection of one config. The zero value (and
// nil) selects nothing.
type Selector struct {
	names    map[string]bool
	byKey    map[string]string
	claim    string // profile_by.jwt_claim
	header   string
	fallback string
}

// New returns the selector of cfg; nil when cfg has no profiles.
func New(cfg *config.Config) *Selector {
	if len(cfg.Profiles) == 0 {
		return nil
	}
	in := &cfg.Inbound
	s := &Selector{names: make(map[string]bool, len(cfg.Profiles)), byKey: in.ProfileBy.APIKeys,
		claim: in.ProfileBy.JWTClaim, header: in.ProfileBy.Header, fallback: in.DefaultProfile}
	if in.Auth.Mode != config.AuthAPIKeys {
		s.byKey = nil
	}
	for name := range cfg.Profiles {
		s.names[name] = true
	}
	return s
}

// Select returns the profile of a request of id whose headers are h and
// whose path named the profile path ("" for /mcp): "" is no profile
// (every tool). Errors wrap ErrUnknown or ErrForbidden; they name what
// carried the profile and echo a name only within bounds.Profile.
func (s *Selector) Select(id inbound.Identity, h http.Header, path string) (string, error) {
	if err := s.checkPath(path); err != nil {
		return "", err
	}
	if s == nil {
		return "", nil
	}
	bound, from, err := s.bound(id, h)
	switch {
	case err != nil:
		return "", err
	case bound == "":
		return path, nil
	case !s.names[bound]:
		return "", fmt.Errorf("%w: %s names profile %q, which is not configured", ErrForbidden, from, bound)
	case path != "" && path != bound:
		return "", fmt.Errorf("%w: the caller's profile is not %q", ErrForbidden, path)
	}
	return bound, nil
}

// checkPath refuses a path that names no profile (ErrUnknown).
func (s *Selector) checkPath(path string) error {
	if path == "" {
		return nil
	}
	if err := bounds.Text("the profile in the path", path, bounds.Profile); err != nil {
		return fmt.Errorf("%w: %v", ErrUnknown, err)
	}
	switch {
	case s == nil:
		return fmt.Errorf("%w %q: no profiles are configured", ErrUnknown, path)
	case !s.names[path]:
		return fmt.Errorf("%w %q", ErrUnknown, path)
	}
	return nil
}

// bound returns the profile the caller's identity maps to, else the
// default, and what named it; "" when neither names one. An identity that
// names one badly is an ErrForbidden.
func (s *Selector) bound(id inbound.Identity, h http.Header) (profile, from string, err error) {
	if p, ok := s.byKey[id.User]; ok {
		if p == "" {
			return "", "", fmt.Errorf("%w: inbound.profile_by.api_keys maps the caller's key to no profile", ErrForbidden)
		}
		return p, "inbound.profile_by.api_keys", nil
	}
	if s.claim != "" && id.ClaimType != "" {
		from = fmt.Sprintf("the JWT claim %q", s.claim)
		if id.ClaimType != "string" {
			return "", "", fmt.Errorf("%w: %s is %s, not a string naming a profile", ErrForbidden, from, jsonType(id.ClaimType))
		}
		p, err := named(from, id.Claim)
		return p, from, err
	}
	if vs := h.Values(s.header); s.header != "" && len(vs) > 0 {
		from = "the " + s.header + " header"
		if len(vs) > 1 {
			return "", "", fmt.Errorf("%w: %s is sent %d times; it must be sent once", ErrForbidden, from, len(vs))
		}
		p, err := named(from, strings.Trim(vs[0], " \t"))
		return p, from, err
	}
	return s.fallback, "inbound.default_profile", nil
}

// jsonType names the JSON type t of a claim in a message ("a JSON array").
func jsonType(t string) string {
	switch t {
	case "number", "boolean", "array", "object", "null":
		return "a JSON " + t
	}
	return "of another type"
}

// named checks the profile name v that from carried: not empty, at most
// bounds.Profile bytes of printable ASCII.
func named(from, v string) (string, error) {
	if v == "" {
		return "", fmt.Errorf("%w: %s is empty; it must name a profile", ErrForbidden, from)
	}
	if err := bounds.Text(from, v, bounds.Profile); err != nil {
		return "", fmt.Errorf("%w: %v", ErrForbidden, err)
	}
	return v, nil
}

// Status is the HTTP status of a Select error.
func Status(err error) int {
	if errors.Is(err, ErrUnknown) {
		return http.StatusNotFound
	}
	return http.StatusForbidden
}
