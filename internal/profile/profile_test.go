package profile

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/inbound"
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
	if got, _ := New(cfg).Select(inbound.Identity{User: "u", Claim: "a", ClaimType: "string"}, nil, ""); got != "a" {
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

// TestSelectFailsClosed (issue 32, attack 9): an identity that names a
// profile badly — an api key mapped to "", a profile header sent empty or
// twice or past bounds.Profile — is refused (403), never "no profile"; a
// path past bounds.Profile names none (404); no message echoes a long
// value.
func TestSelectFailsClosed(t *testing.T) {
	long := strings.Repeat("p", 200)
	cfg := &config.Config{Profiles: map[string]*config.Profile{"a": {}, "b": {}}}
	cfg.Inbound.Auth.Mode = config.AuthAPIKeys
	cfg.Inbound.ProfileBy.APIKeys = map[string]string{"mallory": ""}
	if got, err := New(cfg).Select(inbound.Identity{User: "mallory"}, nil, "b"); !errors.Is(err, ErrForbidden) {
		t.Errorf("an api key mapped to no profile: %q %v, want ErrForbidden", got, err)
	}
	if _, err := New(cfg).Select(inbound.Identity{User: "carol"}, nil, long); !errors.Is(err, ErrUnknown) || strings.Contains(err.Error(), long) {
		t.Errorf("a long path: %v, want ErrUnknown without the path", err)
	}
	cfg.Inbound.Auth.Mode, cfg.Inbound.ProfileBy = config.AuthTrustedHeader, config.ProfileBy{Header: "X-Profile"}
	s := New(cfg)
	for name, h := range map[string]http.Header{"empty": {"X-Profile": {""}}, "blank": {"X-Profile": {" "}}, "twice": {"X-Profile": {"a", "b"}},
		"long": {"X-Profile": {long}}, "control": {"X-Profile": {"a\x00"}}} {
		for _, path := range []string{"", "a", "b"} {
			got, err := s.Select(inbound.Identity{User: "u"}, h, path)
			if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "X-Profile") || strings.Contains(err.Error(), long) {
				t.Errorf("%s header at %q: %q %v, want ErrForbidden naming X-Profile", name, path, got, err)
			}
		}
	}
	if got, err := s.Select(inbound.Identity{User: "u"}, http.Header{}, "a"); got != "a" || err != nil {
		t.Errorf("no header: %q %v, want the path's profile", got, err)
	}
	// The JWT claim: of another type than string, empty, long, or naming
	// no profile.
	cfg.Inbound.Auth.Mode, cfg.Inbound.ProfileBy = config.AuthJWT, config.ProfileBy{JWTClaim: "grp"}
	s = New(cfg)
	for _, id := range []inbound.Identity{{ClaimType: "array"}, {ClaimType: "object"}, {ClaimType: "number"}, {ClaimType: "null"},
		{ClaimType: "string"}, {Claim: long, ClaimType: "string"}, {Claim: "nope", ClaimType: "string"}} {
		for _, path := range []string{"", "a"} {
			id.User = "u"
			got, err := s.Select(id, nil, path)
			if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), `"grp"`) || strings.Contains(err.Error(), long) {
				t.Errorf("claim %+v at %q: %q %v, want ErrForbidden naming the claim", id, path, got, err)
			}
		}
	}
	if got, err := s.Select(inbound.Identity{User: "u"}, nil, "b"); got != "b" || err != nil {
		t.Errorf("no claim: %q %v, want the path's profile", got, err)
	}
}

// FuzzSelect: whatever an identity, header and path carry, Select returns
// a configured profile, or "" only when the identity names none (no claim,
// no header, no key mapping, no default) and the path is empty, or an
// error of bounded length.
func FuzzSelect(f *testing.F) {
	f.Add("alice", "a", "string", "b", "", "")
	f.Add("u", "", "array", "", "a", "")
	f.Add("u", "", "", " ", "", "a")
	f.Add("u", "zz", "string", "", "\x00", "")
	f.Add("mallory", "", "", "", "", "b")
	f.Fuzz(func(t *testing.T, user, claim, claimType, header, header2, path string) {
		cfg := &config.Config{Profiles: map[string]*config.Profile{"a": {}, "b": {}}}
		cfg.Inbound.Auth.Mode = config.AuthAPIKeys
		cfg.Inbound.ProfileBy = config.ProfileBy{APIKeys: map[string]string{"alice": "a", "mallory": ""}, JWTClaim: "grp", Header: "X-Profile"}
		h := http.Header{}
		for _, v := range []string{header, header2} {
			if v != "" {
				h.Add("X-Profile", v)
			}
		}
		got, err := New(cfg).Select(inbound.Identity{User: user, Claim: claim, ClaimType: claimType}, h, path)
		switch {
		case err != nil:
			if got != "" || len(err.Error()) > 400 {
				t.Fatalf("%q with error %q", got, err)
			}
		case got == "":
			if path != "" || claimType != "" || len(h) > 0 || user == "alice" || user == "mallory" {
				t.Fatalf("no profile for user %q claim %q (%s) header %q path %q", user, claim, claimType, h, path)
			}
		case got != "a" && got != "b":
			t.Fatalf("selected %q, not a configured profile", got)
		}
	})
}
