package profile

import (
	"errors"
	"net/http"
	"testing"

	"github.com/mcp-mux/mcp-mux/config"
	"github.com/mcp-mux/mcp-mux/inbound"
)

func TestSelect(t *testing.T) {
	cfg := &config.Config{Profiles: map[string]*config.Profile{"a": {}, "b": {}}}
	cfg.Inbound.Auth.Mode = config.AuthAPIKeys
	cfg.Inbound.ProfileBy.APIKeys = map[string]string{"alice": "a", "eve": "gone"}
	s := New(cfg)
	for _, c := range []struct {
		user, path, want string
		err              error
	}{
		{"alice", "", "a", nil},
		{"alice", "a", "a", nil},
		{"alice", "b", "", ErrForbidden}, // bound to a: no escape by path
		{"eve", "", "", ErrForbidden},    // bound to a profile that is gone
		{"carol", "", "", nil},           // unbound: every tool
		{"carol", "b", "b", nil},         // unbound: the path narrows
		{"carol", "c", "", ErrUnknown},
	} {
		got, err := s.Select(inbound.Identity{User: c.user}, http.Header{}, c.path)
		if got != c.want || !errors.Is(err, c.err) {
			t.Errorf("%s at %q: %q %v, want %q %v", c.user, c.path, got, err, c.want, c.err)
		}
	}
	// default_profile binds the unbound callers too.
	cfg.Inbound.DefaultProfile = "b"
	s = New(cfg)
	if got, err := s.Select(inbound.Identity{User: "carol"}, nil, ""); got != "b" || err != nil {
		t.Errorf("default: %q %v", got, err)
	}
	if _, err := s.Select(inbound.Identity{User: "carol"}, nil, "a"); !errors.Is(err, ErrForbidden) || Status(err) != http.StatusForbidden {
		t.Errorf("default escaped by path: %v", err)
	}
	// The JWT claim and the trusted header.
	cfg = &config.Config{Profiles: map[string]*config.Profile{"a": {}}}
	cfg.Inbound.Auth.Mode, cfg.Inbound.ProfileBy.JWTClaim = config.AuthJWT, "grp"
	if got, _ := New(cfg).Select(inbound.Identity{User: "u", Claim: "a"}, nil, ""); got != "a" {
		t.Errorf("claim: %q", got)
	}
	cfg.Inbound.Auth.Mode, cfg.Inbound.ProfileBy = config.AuthTrustedHeader, config.ProfileBy{Header: "X-Profile"}
	if got, _ := New(cfg).Select(inbound.Identity{User: "u"}, http.Header{"X-Profile": {"a"}}, ""); got != "a" {
		t.Errorf("header: %q", got)
	}
	// No profiles: nothing is selected, and no path names one.
	var none *Selector
	if _, err := none.Select(inbound.Identity{}, nil, "a"); Status(err) != http.StatusNotFound {
		t.Errorf("no profiles, path: %v", err)
	}
}
