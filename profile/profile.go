// Package profile selects the profile (config "profiles") a request's
// caller is served under: the named view of the catalog it sees and may
// call.
//
// The profile a caller's identity maps to (inbound.profile_by: its api
// key's name, a JWT claim, a trusted header; else inbound.default_profile)
// binds it: a path /mcp/{profile} naming another profile is refused, so a
// caller cannot leave its profile by choosing a URL. A caller its identity
// maps to no profile (and no default_profile) may see every tool, and
// /mcp/{profile} narrows it to that profile. With no profiles configured
// nothing is selected and every request sees every tool.
package profile

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcp-mux/mcp-mux/config"
	"github.com/mcp-mux/mcp-mux/inbound"
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
	byClaim  bool
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
		byClaim: in.ProfileBy.JWTClaim != "", header: in.ProfileBy.Header, fallback: in.DefaultProfile}
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
// (every tool). Errors wrap ErrUnknown or ErrForbidden.
func (s *Selector) Select(id inbound.Identity, h http.Header, path string) (string, error) {
	if s == nil {
		if path != "" {
			return "", fmt.Errorf("%w %q: no profiles are configured", ErrUnknown, path)
		}
		return "", nil
	}
	if path != "" && !s.names[path] {
		return "", fmt.Errorf("%w %q", ErrUnknown, path)
	}
	bound := s.bound(id, h)
	switch {
	case bound == "":
		return path, nil
	case !s.names[bound]:
		return "", fmt.Errorf("%w: the caller's profile %q is not configured", ErrForbidden, bound)
	case path != "" && path != bound:
		return "", fmt.Errorf("%w: the caller's profile is not %q", ErrForbidden, path)
	}
	return bound, nil
}

// bound returns the profile the caller's identity maps to, else the
// default; "" when neither names one.
func (s *Selector) bound(id inbound.Identity, h http.Header) string {
	if p := s.byKey[id.User]; p != "" {
		return p
	}
	if s.byClaim && id.Claim != "" {
		return id.Claim
	}
	if s.header != "" {
		if p := strings.TrimSpace(h.Get(s.header)); p != "" {
			return p
		}
	}
	return s.fallback
}

// Status is the HTTP status of a Select error.
func Status(err error) int {
	if errors.Is(err, ErrUnknown) {
		return http.StatusNotFound
	}
	return http.StatusForbidden
}
