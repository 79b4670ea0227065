package catalog

import (
	"encoding/json"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// Skills: the skills extension (SEP-2640, io.modelcontextprotocol/skills).
//
// A server that declares the extension serves skills as resources under
// skill://<skill-path>/SKILL.md, answers skills/list and skills/get, and
// (with directoryRead) resources/directory/read. The extension requires
// the final skill-path segment to equal the skill's frontmatter name and
// digests to cover the files' bytes, so mcp-mux renames no skill and
// rewrites no file: a prefixed server's skills move under its name as the
// URI's authority — skill://pdf-tools/SKILL.md of server "alpha" is
// skill://alpha/pdf-tools/SKILL.md at the mux — and the mux maps the URI
// back on the way upstream. A server with tool_name_prefix false keeps its
// URIs; among such servers the first (config order) serves a URI no listed
// resource names. The guardrails name a skill "skill:<server>_<segment>"
// (prefixed) or "skill:<segment>" for each segment of its skill path: a
// URI is denied when any segment is denied, and with an allowlist it needs
// a segment that is allowed. A profile's view has only its servers' skills.

// SkillsExtension is the skills extension's identifier.
const SkillsExtension = "io.modelcontextprotocol/skills"

// skillScheme is the scheme of the extension's resources.
const skillScheme = "skill://"

// skillFile is the name of a skill's manifest file.
const skillFile = "SKILL.md"

// SkillServer is one server of a view that declared the skills extension.
type SkillServer[S any] struct {
	Server S
	Name   string // the server's configured name
	// Authority is the URI authority its skills are under at the mux (its
	// name), or "" when its URIs are kept as it serves them.
	Authority     string
	DirectoryRead bool // it declared directoryRead: true
}

// Skills is a view's skill servers and the rules that map, route and
// guard their URIs. Immutable once built.
type Skills[S any] struct {
	servers     []SkillServer[S]
	byAuthority map[string]int // authority → index in servers
	verbatim    int            // the first server that keeps its URIs; -1: none
	guard       *guard
	res         *resourceIndex[S] // the view's resources and templates, set once built
}

// buildSkills finds the sources that declared the extension.
func buildSkills[S any](sources []Source[S], pol *Policy, log hclog.Logger) *Skills[S] {
	k := &Skills[S]{byAuthority: map[string]int{}, verbatim: -1, guard: pol.guard}
	for i := range sources {
		src := &sources[i]
		set, ok := skillSettings(src.Lists.Capabilities)
		if !ok {
			continue
		}
		sv := SkillServer[S]{Server: src.Server, Name: src.Name, DirectoryRead: set["directoryRead"] == true}
		if src.Prefix {
			if !toolNameRE.MatchString(src.Name) {
				log.Warn("not serving the skills of a server whose name is not a valid skill:// authority ([A-Za-z0-9_-]); rename it or set tool_name_prefix to false", "server", src.Name)
				continue
			}
			sv.Authority = src.Name
			k.byAuthority[src.Name] = len(k.servers)
		} else if k.verbatim < 0 {
			k.verbatim = len(k.servers)
		}
		k.servers = append(k.servers, sv)
	}
	return k
}

// skillSettings returns a server's settings of the extension and whether
// it declared it.
func skillSettings(c *mcp.ServerCapabilities) (map[string]any, bool) {
	if c == nil {
		return nil, false
	}
	v, ok := c.Extensions[SkillsExtension]
	if !ok {
		return nil, false
	}
	set, _ := v.(map[string]any)
	return set, true
}

// advertiseSkills adds the extension to caps when some source declared
// it, with directoryRead when every one of them did (the mux then answers
// resources/directory/read for each), and the resources capability the
// extension requires.
func advertiseSkills[S any](caps *mcp.ServerCapabilities, k *Skills[S]) {
	if len(k.servers) == 0 {
		return
	}
	set := map[string]any{}
	all := true
	for _, sv := range k.servers {
		all = all && sv.DirectoryRead
	}
	if all {
		set["directoryRead"] = true
	}
	caps.AddExtension(SkillsExtension, set)
	if caps.Resources == nil {
		caps.Resources = &mcp.ResourceCapabilities{ListChanged: true}
	}
}

// Skills is the view's skill servers and URI rules.
func (c *Catalog[S]) Skills() *Skills[S] {
	if c.skills == nil {
		return &Skills[S]{verbatim: -1}
	}
	return c.skills
}

// Servers are the view's skill servers, in config order.
func (k *Skills[S]) Servers() []SkillServer[S] { return k.servers }

// Owner finds the skill server of a URI as the mux serves it and the URI
// as that server serves it: a prefixed server's by the authority; else,
// among the servers that keep their URIs, the one that listed the URI or
// has a template that matches it, else the first. ok is false for a URI
// that is not a skill:// URI of the view, one another server lists or
// templates, one with dot segments or escaped dots or slashes, or one
// longer than MaxResourceURI.
func (k *Skills[S]) Owner(uri string) (sv SkillServer[S], upstreamURI string, ok bool) {
	if len(uri) > MaxResourceURI || !strings.HasPrefix(uri, skillScheme) || !plainPath(uri[len(skillScheme):]) {
		return sv, "", false
	}
	rest := uri[len(skillScheme):]
	if auth, path, cut := strings.Cut(rest, "/"); cut && path != "" {
		if i, ok := k.byAuthority[auth]; ok {
			return k.servers[i], skillScheme + path, true
		}
	}
	if k.verbatim < 0 {
		return sv, "", false
	}
	if owner, found := k.ownerName(uri); found {
		for _, s := range k.servers {
			if s.Authority == "" && s.Name == owner {
				return s, uri, true
			}
		}
		return sv, "", false // another server's resource
	}
	return k.servers[k.verbatim], uri, true
}

// plainPath reports whether a skill path has no dot segments and no
// escaped dot, slash or backslash, so that the segments the guardrails
// judge are the path a server resolves.
func plainPath(p string) bool {
	if strings.ContainsRune(p, '\\') {
		return false
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	l := strings.ToLower(p)
	return !strings.Contains(l, "%2e") && !strings.Contains(l, "%2f") && !strings.Contains(l, "%5c")
}

// ownerName is the name of the server that lists uri or has the first
// template matching it.
func (k *Skills[S]) ownerName(uri string) (string, bool) {
	if k.res == nil {
		return "", false
	}
	if o, ok := k.res.resources[uri]; ok {
		return o.name, true
	}
	for _, t := range k.res.templates {
		if t.tmpl.Match(uri) != nil {
			return t.name, true
		}
	}
	return "", false
}

// Exposed is a URI of sv as the mux serves it (URIs of other schemes are
// kept).
func (k *Skills[S]) Exposed(sv SkillServer[S], uri string) string {
	if sv.Authority == "" || !strings.HasPrefix(uri, skillScheme) {
		return uri
	}
	return skillScheme + sv.Authority + "/" + uri[len(skillScheme):]
}

// Allowed reports whether the guardrails let callers see and read the
// skill files of sv at upstreamURI (the URI as sv serves it): no segment of
// its skill path names a denied skill, and with an allowlist one names an
// allowed skill.
func (k *Skills[S]) Allowed(sv SkillServer[S], upstreamURI string) bool {
	g := k.guard
	if g == nil || !g.enabled {
		return true
	}
	rest := strings.TrimPrefix(upstreamURI, skillScheme)
	allowed := g.allowed == nil
	for seg := range strings.SplitSeq(rest, "/") {
		if seg == "" || seg == skillFile {
			continue
		}
		name := SkillGuardName(sv.Authority, seg)
		if g.denied[name] {
			return false
		}
		allowed = allowed || g.allowed[name]
	}
	return allowed
}

// SkillGuardName is the name the guardrails know a skill by: "skill:"
// and the skill's name, prefixed with its server's name (authority) as
// the server's tools are.
func SkillGuardName(authority, skill string) string {
	if authority == "" {
		return "skill:" + skill
	}
	return "skill:" + authority + "_" + skill
}

// exposeResource lists a skill server's skill:// resource under the URI
// the mux serves it at; other resources are kept.
func exposeResource[S any](src *Source[S], k *Skills[S], r upstream.Item) upstream.Item {
	i, ok := k.byAuthority[src.Name]
	if !ok || !strings.HasPrefix(r.Key, skillScheme) || k.servers[i].Name != src.Name {
		return r
	}
	uri := k.Exposed(k.servers[i], r.Key)
	var m map[string]json.RawMessage
	if json.Unmarshal(r.Raw, &m) != nil || m == nil {
		return r
	}
	m["uri"], _ = json.Marshal(uri)
	raw, err := json.Marshal(m)
	if err != nil {
		return r
	}
	return upstream.Item{Key: uri, Raw: raw}
}
