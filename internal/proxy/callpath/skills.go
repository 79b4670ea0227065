package callpath

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// The skills extension (SEP-2640) through the mux: skills/list merged over
// the caller's view's skill servers, skills/get, resources/directory/read
// and resources/read of a skill file routed to the server that owns the
// URI, with URIs mapped between the mux's form and the server's
// (catalog/skills.go says how) and the guardrails applied to every skill
// URI a result lists or a request names.

// skillMethods are the extension's methods mcp-mux answers.
var skillMethods = []string{"skills/list", "skills/get", "resources/directory/read"}

// Bounds on what one server's skills/list may make the mux hold: pages
// followed, entries kept, and files in one entry (the extension's own
// limit on a skill; an entry past it is dropped).
const (
	maxSkillPages     = 16
	maxSkillsPerList  = 1000
	maxSkillResources = 512
)

// skillParams are the params of the extension's methods.
type skillParams struct {
	mcp.ParamsBase
	URI    string `json:"uri,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// RegisterSkillMethods makes the SDK server accept the extension's
// methods in both eras; Dispatch answers them (the handler registered here
// is reached only when Dispatch passes a request on, which it does not).
func RegisterSkillMethods(srv *mcp.Server) error {
	for _, m := range skillMethods {
		err := mcp.AddReceivingCustomMethod(srv, m, func(context.Context, *mcp.ServerSession, *skillParams) (*mcpwire.RawResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: m + " is not served here"}
		})
		if err != nil {
			return fmt.Errorf("registering %s: %w", m, err)
		}
	}
	return nil
}

// IsSkillMethod reports whether method is one of the extension's.
func IsSkillMethod(method string) bool { return slices.Contains(skillMethods, method) }

// ServeSkill answers a request of the extension (method, its raw params)
// for a 2025-11-25 session: go-sdk's session transport, used outside its
// HTTP handler, accepts standard methods only, so these do not reach the
// SDK path. It returns the raw result or the error the caller gets.
func ServeSkill(ctx context.Context, s *Router, st *Session, h http.Header, method string, params json.RawMessage) (json.RawMessage, error) {
	var p skillParams
	if len(params) > 0 && json.Unmarshal(params, &p) != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + ": params are not an object of uri and cursor strings"}
	}
	req := &mcp.ServerRequest[*skillParams]{Params: &p, Extra: &mcp.RequestExtra{Header: h}}
	res, err := s.Dispatch(ctx, st, LegacyEra{}, method, req, nil)
	if err != nil {
		return nil, err
	}
	return res.(*mcpwire.RawResult).Raw, nil
}

// errUnknownSkill answers a skills/get or directory read of a URI no skill
// server of the caller's view serves (or the guardrails hide).
func errUnknownSkill(method string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + ": no skill server of this view serves the URI"}
}

// errSkillFileNotFound answers a read of a skill file the view does not
// serve or the guardrails hide, as a resource no server has.
var errSkillFileNotFound = &jsonrpc.Error{Code: -32002, Message: "resource not found"}

// listSkills answers skills/list: every skill server of the view asked
// (its pages followed, within the bounds), each entry under the mux's URIs
// (the skills stage), the first entry of a URI kept, then paged as the
// mux pages its lists.
func listSkills(s *Router, ctx context.Context, r request) (mcp.Result, error) {
	seen := map[string]bool{}
	var items []json.RawMessage
	for _, sv := range r.cat.Skills().Servers() {
		entries, err := serverSkills(s, ctx, r, sv.Server)
		if err != nil {
			s.logFor(ctx).Warn("skills/list: leaving out a server's skills", "server", sv.Name, "err", err)
			continue
		}
		for _, e := range entries {
			uri := entryURI(e)
			if uri == "" || seen[uri] {
				// First server wins, as tools do; asked on every list, so
				// not a warning each time.
				s.logFor(ctx).Debug("skills/list: dropping a skill whose URI an earlier server listed", "server", sv.Name)
				continue
			}
			seen[uri] = true
			items = append(items, e)
		}
	}
	return pageResult(items, "skills", cursorOf(r.req), s.pageSize)
}

// serverSkills is one server's skills/list, every page, as the skills
// stage rewrote them.
func serverSkills(s *Router, ctx context.Context, r request, b *Backend) ([]json.RawMessage, error) {
	var out []json.RawMessage
	cursor := ""
	for range maxSkillPages {
		res, err := s.Forward(ctx, r.st, r.e, HeaderOf(r.req), b, "skills/list", &skillParams{Cursor: cursor})
		if err != nil {
			return out, err
		}
		var page struct {
			Skills     []json.RawMessage `json:"skills"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(res.(*mcpwire.RawResult).Raw, &page); err != nil {
			return out, fmt.Errorf("decoding skills/list: %w", err)
		}
		out = append(out, page.Skills...)
		if len(out) >= maxSkillsPerList {
			return out[:maxSkillsPerList], nil
		}
		if page.NextCursor == "" || page.NextCursor == cursor {
			return out, nil
		}
		cursor = page.NextCursor
	}
	return out, nil
}

// skillRequest answers skills/get and resources/directory/read at the
// skill server that owns the URI.
func skillRequest(s *Router, ctx context.Context, r request) (mcp.Result, error) {
	p, _ := r.req.GetParams().(*skillParams)
	if p == nil || p.URI == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: r.method + ": missing required 'uri'"}
	}
	sv, _, ok := r.cat.Skills().Owner(p.URI)
	if !ok {
		return nil, errUnknownSkill(r.method)
	}
	return s.Forward(ctx, r.st, r.e, HeaderOf(r.req), sv.Server, r.method, p)
}

// skillsStage maps the skill URIs of a request to the form its server
// serves and those of its result to the mux's, and applies the guardrails
// to them: a hidden skill's files are not found, its entries not listed.
// Requests that name no skill URI of the view pass untouched.
func skillsStage(s *Router) Stage {
	return Stage{
		Name:    "skills",
		Methods: ResourceRead | Other,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				switch c.Method {
				case "skills/list":
					return c.skillList(ctx, next)
				case "resources/read", "skills/get", "resources/directory/read":
					return c.skillTarget(ctx, next)
				}
				return next(ctx, c)
			}
		},
	}
}

// skillList rewrites one server's skills/list page.
func (c *Call) skillList(ctx context.Context, next CallFunc) (json.RawMessage, error) {
	k := c.View.Skills()
	sv, ok := skillServerOf(k, c.Backend)
	if !ok {
		return nil, errUnknownSkill(c.Method)
	}
	raw, err := next(ctx, c)
	if err != nil {
		return nil, err
	}
	return rewriteSkillList(raw, k, sv)
}

// skillTarget maps the URI a request names back to its server's form,
// and the URIs of the result to the mux's.
func (c *Call) skillTarget(ctx context.Context, next CallFunc) (json.RawMessage, error) {
	k := c.View.Skills()
	uri := skillURIOf(c.Params)
	sv, up, ok := k.Owner(uri)
	if !ok || c.Backend == nil || sv.Name != c.Backend.Name {
		switch {
		case c.Method != "resources/read":
			return nil, errUnknownSkill(c.Method)
		case underAuthority(k, c.Backend, uri):
			return nil, errSkillFileNotFound
		}
		return next(ctx, c) // not a skill file of this view
	}
	if !k.Allowed(sv, up) {
		c.Record.Deny("guardrails: skill hidden")
		if c.Method == "resources/read" {
			return nil, errSkillFileNotFound
		}
		return nil, errUnknownSkill(c.Method)
	}
	c.Params = withSkillURI(c.Params, up)
	raw, err := next(ctx, c)
	if err != nil {
		return nil, err
	}
	return rewriteSkillResult(c.Method, raw, k, sv)
}

// underAuthority reports whether a read of uri would reach b, a skill
// server whose skills are under its authority, in b's own form: a
// skill:// URI it lists or templates, or that only it could serve, which
// no caller may read around the mapping (and the guardrails).
func underAuthority(k *skills, b *Backend, uri string) bool {
	sv, ok := skillServerOf(k, b)
	return ok && sv.Authority != "" && strings.HasPrefix(uri, "skill://")
}

// skillServerOf is the skill server of b in k.
func skillServerOf(k *catalog.Skills[*Backend], b *Backend) (catalog.SkillServer[*Backend], bool) {
	for _, sv := range k.Servers() {
		if b != nil && sv.Name == b.Name {
			return sv, true
		}
	}
	return catalog.SkillServer[*Backend]{}, false
}

// skillURIOf is the URI a resources/read or skill request names.
func skillURIOf(params any) string {
	switch p := params.(type) {
	case *mcp.ReadResourceParams:
		return p.URI
	case *skillParams:
		return p.URI
	}
	return ""
}

// withSkillURI is a copy of params naming uri instead.
func withSkillURI(params any, uri string) any {
	switch p := params.(type) {
	case *mcp.ReadResourceParams:
		q := *p
		q.URI = uri
		return &q
	case *skillParams:
		q := *p
		q.URI = uri
		return &q
	}
	return params
}

// entryURI is the uri of a skill entry as listed.
func entryURI(entry json.RawMessage) string {
	var e struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(entry, &e)
	return e.URI
}
