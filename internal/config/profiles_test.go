package config

import (
	"slices"
	"strings"
	"testing"
)

// TestProfilesValidation: every reference a profile or its selection
// makes is checked, and each problem names its field.
func TestProfilesValidation(t *testing.T) {
	doc := `{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}},
	  "profiles": {
	    "ok": {"servers": ["a"], "include_tools": ["a_*"], "exclude_tools": ["a_s?"], "routing": {"a": {"mode": "prefer", "keywords": ["k"]}}},
	    "bad name!": {},
	    "refs": {"servers": ["a", "zzz"], "include_tools": ["[x"], "routing": {"b": {"mode": "off"}, "nope": {}}, "extra": 1}},
	  "inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "k1"}},
	    "profile_by": {"api_keys": {"alice": "ok", "mallory": "ghost"}, "jwt_claim": "grp", "header": "X-Profile"},
	    "default_profile": "missing"}}`
	_, err := Parse([]byte(doc), LoadOptions{Filename: "t.json", LookupEnv: func(string) (string, bool) { return "", false }})
	var got []string
	for _, p := range Problems(err) {
		got = append(got, p.Field+": "+p.Message)
	}
	for _, want := range []string{
		`profiles.bad name!: a profile name must match`,
		`profiles.refs.servers[1]: unknown server "zzz"`,
		`profiles.refs.include_tools[0]: "[x" is not a valid glob`,
		`profiles.refs.extra: unknown key`,
		`profiles.refs.routing.b: server "b" is not one of the profile's servers`,
		`profiles.refs.routing.nope: unknown server "nope"`,
		`inbound.default_profile: unknown profile "missing"`,
		`inbound.profile_by.api_keys.mallory: unknown profile "ghost"`,
		`inbound.profile_by.api_keys.mallory: "mallory" is not a key name in inbound.auth.keys`,
		`inbound.profile_by.jwt_claim: needs inbound.auth.mode "jwt"`,
		`inbound.profile_by.header: needs inbound.auth.mode "trusted_header"`,
	} {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, want) }) {
			t.Errorf("missing problem %q in:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if len(got) != 11 {
		t.Errorf("%d problems, want 11:\n%s", len(got), strings.Join(got, "\n"))
	}
}

// TestProfilesParsed: a valid block is read as written.
func TestProfilesParsed(t *testing.T) {
	doc := `{"mcpServers": {"a": {"command": "x"}},
	  "profiles": {"p": {"servers": ["a"], "exclude_tools": ["a_x"], "routing": {"a": {"priority": 9}}}, "all": {}},
	  "inbound": {"auth": {"mode": "trusted_header"}, "profile_by": {"header": "X-Profile"}, "default_profile": "all"}}`
	cfg, err := Parse([]byte(doc), LoadOptions{Filename: "t.json"})
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Profiles["p"]
	if p == nil || !slices.Equal(p.Servers, []string{"a"}) || p.IncludeTools != nil || *p.Routing["a"].Priority != 9 {
		t.Fatalf("profile p: %+v", p)
	}
	if cfg.Profiles["all"].Servers != nil || cfg.Inbound.ProfileBy.Header != "X-Profile" || cfg.Inbound.DefaultProfile != "all" {
		t.Errorf("profiles %+v inbound %+v", cfg.Profiles, cfg.Inbound.ProfileBy)
	}
}

// always_listed takes valid globs, at most MaxAlwaysListed, at the top
// level and in a profile; a profile's [] pins nothing in its view.
func TestAlwaysListedValidation(t *testing.T) {
	many := `"x"` + strings.Repeat(`,"x"`, MaxAlwaysListed)
	doc := `{"mcpServers": {"a": {"command": "x"}},
	  "tool_search": {"enabled": true, "always_listed": ["a_*", "[bad"]},
	  "profiles": {"p": {"always_listed": [` + many + `]}, "q": {"always_listed": []}}}`
	cfg, err := Parse([]byte(doc), LoadOptions{Filename: "t.json", LookupEnv: func(string) (string, bool) { return "", false }})
	var got []string
	for _, p := range Problems(err) {
		got = append(got, p.Field+": "+p.Message)
	}
	for _, want := range []string{
		`tool_search.always_listed[1]: "[bad" is not a valid glob`,
		`profiles.p.always_listed: has 257 globs; at most 256 are allowed`,
	} {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, want) }) {
			t.Errorf("missing problem %q in:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if len(got) != 2 {
		t.Errorf("problems = %q, want exactly 2", got)
	}
	cfg, err = Parse([]byte(`{"mcpServers": {"a": {"command": "x"}}, "profiles": {"q": {"always_listed": []}, "r": {}}}`),
		LoadOptions{Filename: "t.json", LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	if q, r := cfg.Profiles["q"].AlwaysListed, cfg.Profiles["r"].AlwaysListed; q == nil || len(q) != 0 || r != nil {
		t.Errorf("q = %#v (want empty, not nil), r = %#v (want nil)", q, r)
	}
}
