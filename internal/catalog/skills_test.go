package catalog_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// skillSource is a server that declared the skills extension (with
// directoryRead when dir) and lists resources at uris.
func skillSource(name string, prefix, dir bool, uris ...string) srv {
	s := source(name, prefix)
	caps := &mcp.ServerCapabilities{Resources: &mcp.ResourceCapabilities{}}
	set := map[string]any{}
	if dir {
		set["directoryRead"] = true
	}
	caps.AddExtension(catalog.SkillsExtension, set)
	s.Lists.Capabilities = caps
	for _, u := range uris {
		raw, _ := json.Marshal(map[string]any{"uri": u, "name": u})
		s.Lists.Resources = append(s.Lists.Resources, upstream.Item{Key: u, Raw: raw})
	}
	return s
}

// listedURIs are a catalog's resources/list URIs.
func listedURIs(c *catalog.Catalog[string]) []string {
	var out []string
	for _, r := range c.Resources() {
		var m struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(r, &m)
		out = append(out, m.URI)
	}
	return out
}

// TestSkillsAdvertised: the extension is advertised when a server
// declares it, directoryRead only when every skill server does, and a
// view without skill servers advertises none.
func TestSkillsAdvertised(t *testing.T) {
	ext := func(c *catalog.Catalog[string]) (map[string]any, bool) {
		caps := c.Capabilities()
		v, ok := caps.Extensions[catalog.SkillsExtension]
		m, _ := v.(map[string]any)
		return m, ok && caps.Resources != nil
	}
	plain := source("plain", true, "t")
	both := build([]srv{skillSource("alpha", true, true), skillSource("beta", true, true), plain}, catalog.Options{
		Profiles: map[string]*config.Profile{"p": {Servers: []string{"plain"}}}})
	if m, ok := ext(both); !ok || m["directoryRead"] != true {
		t.Errorf("two directoryRead servers: %v %v", m, ok)
	}
	if _, ok := ext(both.For("p")); ok {
		t.Errorf("a view without skill servers advertises the extension")
	}
	one := build([]srv{skillSource("alpha", true, true), skillSource("beta", true, false)}, catalog.Options{})
	if m, ok := ext(one); !ok || m["directoryRead"] != nil {
		t.Errorf("one server without directoryRead: %v %v", m, ok)
	}
	if _, ok := ext(build([]srv{plain}, catalog.Options{})); ok {
		t.Errorf("no skill server, extension advertised")
	}
}

// TestSkillURIs: a prefixed server's skills move under its name, reads
// map back, the resources/list shows the mux's URIs, servers that keep
// their URIs route by listing, template and then config order, and a
// profile's view has only its servers' skills.
func TestSkillURIs(t *testing.T) {
	tmplSrc := source("files", true)
	tmplRaw, _ := json.Marshal(map[string]any{"uriTemplate": "skill://repo/{+path}", "name": "repo"})
	tmplSrc.Lists.Templates = []upstream.Item{{Key: "skill://repo/{+path}", Raw: tmplRaw}}
	c := build([]srv{
		skillSource("alpha", true, true, "skill://pdf-tools/SKILL.md"),
		skillSource("beta", true, true, "skill://pdf-tools/SKILL.md"),
		skillSource("v1", false, true),
		skillSource("v2", false, true, "skill://only-v2/SKILL.md"),
		tmplSrc,
	}, catalog.Options{Profiles: map[string]*config.Profile{"a": {Servers: []string{"alpha"}}}})
	k := c.Skills()
	cases := []struct{ uri, server, up string }{
		{"skill://alpha/pdf-tools/SKILL.md", "alpha", "skill://pdf-tools/SKILL.md"},
		{"skill://beta/pdf-tools/templates/a.md", "beta", "skill://pdf-tools/templates/a.md"},
		{"skill://beta/x/y/SKILL.md", "beta", "skill://x/y/SKILL.md"},
		{"skill://only-v2/SKILL.md", "v2", "skill://only-v2/SKILL.md"}, // listed by v2
		{"skill://other/SKILL.md", "v1", "skill://other/SKILL.md"},     // the first that keeps its URIs
		{"skill://repo/a/SKILL.md", "", ""},                            // files' template: not a skill server
		{"skill://alpha", "v1", "skill://alpha"},                       // no path under the authority
		{"res://alpha/x", "", ""},
		{"skill://alpha/a/../b/SKILL.md", "", ""},
		{"skill://alpha/a/%2e%2E/b/SKILL.md", "", ""},
		{"skill://alpha/a%2Fb/SKILL.md", "", ""},
		{"skill://alpha/a\\b/SKILL.md", "", ""},
		{"skill://alpha/" + strings.Repeat("a", catalog.MaxResourceURI), "", ""},
	}
	for _, tc := range cases {
		sv, up, ok := k.Owner(tc.uri)
		if ok != (tc.server != "") || sv.Name != tc.server || up != tc.up {
			t.Errorf("Owner(%.60q) = %q %q %v, want %q %q", tc.uri, sv.Name, up, ok, tc.server, tc.up)
		}
		if ok && k.Exposed(sv, up) != tc.uri {
			t.Errorf("Exposed(%s, %s) = %s, want %s", sv.Name, up, k.Exposed(sv, up), tc.uri)
		}
	}
	if got := c.ResourceOwner("skill://repo/a/SKILL.md"); got != "files" {
		t.Errorf("templated skill URI owned by %q, want files", got)
	}
	if got := c.ResourceOwner("skill://beta/pdf-tools/SKILL.md"); got != "beta" {
		t.Errorf("beta's SKILL.md owned by %q", got)
	}
	want := []string{"skill://alpha/pdf-tools/SKILL.md", "skill://beta/pdf-tools/SKILL.md", "skill://only-v2/SKILL.md"}
	if got := listedURIs(c); !slices.Equal(got, want) {
		t.Errorf("resources/list %v, want %v", got, want)
	}
	a := c.For("a").Skills()
	if _, _, ok := a.Owner("skill://beta/pdf-tools/SKILL.md"); ok {
		t.Errorf("profile a routes beta's skill")
	}
	if got := len(a.Servers()); got != 1 {
		t.Errorf("profile a has %d skill servers, want 1", got)
	}
}

// TestSkillGuardrails: a skill is named skill:<server>_<segment> for each
// segment of its path; a denied segment hides it, an allowlist needs an
// allowed segment, and a server that keeps its URIs names skills bare.
func TestSkillGuardrails(t *testing.T) {
	sources := []srv{skillSource("alpha", true, true), skillSource("v", false, true)}
	deny := build(sources, catalog.Options{Guardrails: config.Guardrails{Enabled: true, DeniedTools: []string{"skill:alpha_secret", "skill:hidden"}}}).Skills()
	allow := build(sources, catalog.Options{Guardrails: config.Guardrails{Enabled: true, AllowedTools: []string{"skill:alpha_pdf-tools"}}}).Skills()
	off := build(sources, catalog.Options{Guardrails: config.Guardrails{Enabled: false, DeniedTools: []string{"skill:alpha_secret"}}}).Skills()
	cases := []struct {
		k       *catalog.Skills[string]
		uri     string
		allowed bool
	}{
		{deny, "skill://alpha/secret/SKILL.md", false},
		{deny, "skill://alpha/secret/files/a.md", false},
		{deny, "skill://alpha/team/secret/SKILL.md", false},
		{deny, "skill://alpha/pdf-tools/SKILL.md", true},
		{deny, "skill://hidden/SKILL.md", false},
		{deny, "skill://secret/SKILL.md", true}, // v's: named bare, "secret" is alpha_secret's
		{allow, "skill://alpha/pdf-tools/SKILL.md", true},
		{allow, "skill://alpha/other/SKILL.md", false},
		{off, "skill://alpha/secret/SKILL.md", true},
	}
	for _, tc := range cases {
		sv, up, ok := tc.k.Owner(tc.uri)
		if !ok {
			t.Fatalf("Owner(%s) failed", tc.uri)
		}
		if got := tc.k.Allowed(sv, up); got != tc.allowed {
			t.Errorf("Allowed(%s) = %v, want %v", tc.uri, got, tc.allowed)
		}
	}
}

// FuzzSkillURI: Owner takes any string without panicking, never routes
// a URI past the bound, and Exposed maps what it found back to the URI.
func FuzzSkillURI(f *testing.F) {
	for _, s := range []string{"skill://alpha/pdf-tools/SKILL.md", "skill://alpha", "skill://", "skill:///x", "skill://beta//", "res://x", "skill://v/%2F/SKILL.md", ""} {
		f.Add(s)
	}
	k := build([]srv{skillSource("alpha", true, true), skillSource("beta", true, false, "skill://x/SKILL.md"), skillSource("v", false, true)}, catalog.Options{}).Skills()
	f.Fuzz(func(t *testing.T, uri string) {
		sv, up, ok := k.Owner(uri)
		if !ok {
			return
		}
		if len(uri) > catalog.MaxResourceURI || !strings.HasPrefix(up, "skill://") {
			t.Fatalf("Owner(%q) routed to %s as %q", uri, sv.Name, up)
		}
		if got := k.Exposed(sv, up); got != uri {
			t.Fatalf("Exposed(Owner(%q)) = %q", uri, got)
		}
		_ = k.Allowed(sv, up)
	})
}
