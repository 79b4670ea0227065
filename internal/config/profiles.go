package config

import (
	"net/textproto"
	"path"
	"regexp"
	"slices"
	"strconv"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
	"github.com/mcp-mux/mcp-mux/internal/headercheck"
)

// Profile is one entry of the "profiles" block: a named set of tools a
// caller is limited to, selected by who the caller is
// (inbound.profile_by, inbound.default_profile) or by the path
// /mcp/{profile}.
type Profile struct {
	Name string
	// Servers are the servers whose tools, prompts and resources the
	// profile serves; nil: every server.
	Servers []string
	// IncludeTools are path.Match globs on visible tool names: only a
	// matching tool is served; nil: every tool of Servers.
	IncludeTools []string
	// ExcludeTools are globs on visible tool names never served, even if
	// included.
	ExcludeTools []string
	// AlwaysListed replaces tool_search.always_listed in the profile's
	// view; nil: the top-level list applies.
	AlwaysListed []string
	// Routing overrides the routing hints of a server's tools within the
	// profile (server name → the fields set).
	Routing map[string]*RoutingOverride
}

// ProfileBy is "inbound.profile_by": how a caller's identity selects its
// profile. A caller selected by none of them gets inbound.default_profile.
type ProfileBy struct {
	// APIKeys maps an api_keys user (a key's name in inbound.auth.keys)
	// to a profile.
	APIKeys map[string]string
	// JWTClaim names a JWT claim (jwt mode) whose string value is the
	// profile's name.
	JWTClaim string
	// Header names a request header (trusted_header mode: set by the
	// trusted front, like the user header) whose value is the profile's
	// name.
	Header string
}

// profileNameRE is the charset of a profile name: it is a path segment.
var profileNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// parseProfiles reads the "profiles" block: an object keyed by profile
// name.
func (c *Config) parseProfiles(o *object) {
	c.Profiles = make(map[string]*Profile, len(o.n.Keys))
	for i, name := range o.n.Keys {
		path := o.field(name)
		o.used[name] = true
		if !profileNameRE.MatchString(name) {
			o.f.problem(path, "a profile name must match ^[A-Za-z0-9_-]{1,64}$ (it is the path segment of /mcp/{profile})")
		}
		po := objectAt(o.n.Vals[i], path, o.f)
		if po == nil {
			continue
		}
		p := &Profile{Name: name, Servers: po.strList("servers"), IncludeTools: po.strList("include_tools"), ExcludeTools: po.strList("exclude_tools")}
		checkGlobs(po, "include_tools", p.IncludeTools)
		checkGlobs(po, "exclude_tools", p.ExcludeTools)
		p.AlwaysListed = alwaysListed(po)
		p.Routing = parseProfileRouting(po.take("routing"), po.field("routing"), o.f)
		po.rejectUnknown()
		c.Profiles[name] = p
	}
}

// alwaysListed reads an "always_listed" list of globs, at most
// MaxAlwaysListed of them.
func alwaysListed(o *object) []string {
	globs := o.strList("always_listed")
	checkGlobs(o, "always_listed", globs)
	if len(globs) > MaxAlwaysListed {
		o.f.problem(o.field("always_listed"), "has %d globs; at most %d are allowed", len(globs), MaxAlwaysListed)
	}
	return globs
}

// checkGlobs records a problem for each pattern path.Match rejects.
func checkGlobs(o *object, key string, globs []string) {
	for i, g := range globs {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			o.f.problem(o.field(key)+"["+strconv.Itoa(i)+"]", "%q is not a valid glob (path.Match syntax: * ? [...] \\)", g)
		}
	}
}

// parseProfileRouting reads a profile's routing: server name → a strict
// routing object.
func parseProfileRouting(n *rawdoc.Node, path string, f *findings) map[string]*RoutingOverride {
	o := objectAt(n, path, f)
	if o == nil {
		return nil
	}
	out := make(map[string]*RoutingOverride, len(o.n.Keys))
	for i, server := range o.n.Keys {
		o.used[server] = true
		if r := parseRouting(o.n.Vals[i], o.field(server), f); r != nil {
			out[server] = r
		}
	}
	return out
}

// parseProfileBy reads inbound.profile_by and inbound.default_profile;
// checkProfiles checks them against the profiles and the auth mode.
func (in *Inbound) parseProfileBy(o *object) {
	in.DefaultProfile = o.str("default_profile", "")
	pb := objectAt(o.take("profile_by"), o.field("profile_by"), o.f)
	if pb == nil {
		return
	}
	if entries, ok := pb.strMap("api_keys"); ok {
		in.ProfileBy.APIKeys = make(map[string]string, len(entries))
		for _, e := range entries {
			in.ProfileBy.APIKeys[e.key] = e.val
		}
	}
	in.ProfileBy.JWTClaim = pb.str("jwt_claim", "")
	pb.headerName("header", &in.ProfileBy.Header)
	pb.rejectUnknown()
}

// checkProfiles checks what the profiles and their selection refer to:
// servers that exist, profiles that exist, and a selection the auth mode
// can make.
func (c *Config) checkProfiles(f *findings) {
	known := func(server string) bool {
		return c.Server(server) != nil || slices.ContainsFunc(c.Invalid, func(e ServerError) bool { return e.Name == server })
	}
	for _, name := range c.profileNames() {
		p := c.Profiles[name]
		for i, s := range p.Servers {
			if !known(s) {
				f.problem("profiles."+name+".servers["+strconv.Itoa(i)+"]", "unknown server %q (not in mcpServers)", s)
			}
		}
		for s := range p.Routing {
			if !known(s) {
				f.problem("profiles."+name+".routing."+s, "unknown server %q (not in mcpServers)", s)
			} else if p.Servers != nil && !slices.Contains(p.Servers, s) {
				f.problem("profiles."+name+".routing."+s, "server %q is not one of the profile's servers", s)
			}
		}
	}
	in := &c.Inbound
	c.knownProfile(f, "inbound.default_profile", in.DefaultProfile)
	pb := &in.ProfileBy
	for user, p := range pb.APIKeys {
		field := "inbound.profile_by.api_keys." + user
		if p == "" {
			f.problem(field, "must name a profile (leave out a key whose caller may see every tool)")
		}
		c.knownProfile(f, field, p)
		if _, ok := in.Auth.Keys[user]; !ok {
			f.problem(field, "%q is not a key name in inbound.auth.keys", user)
		}
	}
	needMode(f, "inbound.profile_by.api_keys", len(pb.APIKeys) > 0, in.Auth.Mode, AuthAPIKeys)
	needMode(f, "inbound.profile_by.jwt_claim", pb.JWTClaim != "", in.Auth.Mode, AuthJWT)
	needMode(f, "inbound.profile_by.header", pb.Header != "", in.Auth.Mode, AuthTrustedHeader)
	if pb.Header != "" && headercheck.CheckName(pb.Header) == nil && textproto.CanonicalMIMEHeaderKey(pb.Header) == textproto.CanonicalMIMEHeaderKey(in.UserHeader) {
		f.problem("inbound.profile_by.header", "must differ from inbound.user_header")
	}
}

// knownProfile records a problem when name is set and names no profile.
func (c *Config) knownProfile(f *findings, field, name string) {
	if name == "" {
		return
	}
	if _, ok := c.Profiles[name]; !ok {
		f.problem(field, "unknown profile %q (not in profiles)", name)
	}
}

// needMode records a problem when a selection is set under another auth
// mode than the one that can make it.
func needMode(f *findings, field string, set bool, mode, want string) {
	if set && mode != want {
		f.problem(field, "needs inbound.auth.mode %q (the mode is %q)", want, mode)
	}
}

// profileNames returns the profiles' names, sorted (problems in a stable
// order).
func (c *Config) profileNames() []string {
	names := make([]string, 0, len(c.Profiles))
	for n := range c.Profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
