package config

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Tool overrides: a tools.<raw> entry may rename a tool ("name", which the
// server prefix still precedes), re-title and re-describe it, set its
// annotations, and fix arguments the mux fills in from the config
// ("fixed_arguments": hidden from the listed inputSchema, set in every
// call). Every key is checked strictly; the entry's other keys are kept in
// ToolOverride.Extra as before, so a DeerFlow file loads unchanged.

// exposedNameRE is the charset and length of an override's name, the
// catalog's rule for visible tool names.
var exposedNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// Presentation is what a tool override changes of how its tool is shown,
// and the arguments the mux fills in. The zero value changes nothing.
type Presentation struct {
	// Name replaces the raw name in the visible name (the server prefix
	// still applies); "" keeps the raw name. Calls still reach the raw name.
	Name string
	// Title and Description replace the tool's own; nil keeps them.
	Title, Description *string
	// Annotations sets the annotation fields it names; nil keeps the tool's.
	Annotations *ToolAnnotations
	// FixedArguments maps input properties to JSON values (strings after
	// $VAR expansion): they are removed from the listed inputSchema and set
	// in the arguments of every call, over whatever the caller sent.
	FixedArguments map[string]json.RawMessage
}

// ToolAnnotations holds the annotation fields an override sets; nil
// fields keep the tool's own.
type ToolAnnotations struct {
	Title                                                        *string
	ReadOnlyHint, DestructiveHint, IdempotentHint, OpenWorldHint *bool
}

// ExposedName returns the name the raw tool is shown under before the
// server prefix: its override's name, or raw.
func (s *Server) ExposedName(raw string) string {
	if ov, ok := s.Tools[raw]; ok && ov.Name != "" {
		return ov.Name
	}
	return raw
}

// parsePresentation reads the presentation keys of one tools.<raw> entry.
func parsePresentation(o *object) Presentation {
	var p Presentation
	if n := o.take("name"); n != nil {
		switch {
		case n.Kind != rawdoc.String:
			o.f.problem(o.field("name"), "must be a string, not %s", kindName(n.Kind))
		case !exposedNameRE.MatchString(n.Value):
			o.f.problem(o.field("name"), "MCP tool name must match ^[A-Za-z0-9_-]{1,128}$")
		default:
			p.Name = n.Value
		}
	}
	p.Title = o.optStr("title")
	p.Description = o.optStr("description")
	if a := objectAt(o.take("annotations"), o.field("annotations"), o.f); a != nil {
		p.Annotations = &ToolAnnotations{
			Title:           a.optStr("title"),
			ReadOnlyHint:    a.optBool("readOnlyHint"),
			DestructiveHint: a.optBool("destructiveHint"),
			IdempotentHint:  a.optBool("idempotentHint"),
			OpenWorldHint:   a.optBool("openWorldHint"),
		}
		a.rejectUnknown()
	}
	p.FixedArguments = fixedArguments(o.take("fixed_arguments"), o.field("fixed_arguments"), o.f)
	return p
}

// optStr reads an optional string; nil when absent, null or not a string
// (a problem).
func (o *object) optStr(key string) *string {
	n := o.take(key)
	if n == nil {
		return nil
	}
	if n.Kind != rawdoc.String {
		o.f.problem(o.field(key), "must be a string, not %s", kindName(n.Kind))
		return nil
	}
	v := n.Value
	return &v
}

// optBool reads an optional boolean; nil when absent, null or not a
// boolean (a problem).
func (o *object) optBool(key string) *bool {
	n := o.take(key)
	if n == nil {
		return nil
	}
	if n.Kind != rawdoc.Bool {
		o.f.problem(o.field(key), "must be a boolean, not %s", kindName(n.Kind))
		return nil
	}
	v := n.Bool
	return &v
}

// fixedArguments reads a fixed_arguments object: property name → any JSON
// value, strings $VAR-expanded. Its values are never put in problems. Two
// names one lenient decoder takes for the same field (wire.FoldName:
// "scope" and "Scope") are a problem: the upstream would see one of them.
func fixedArguments(n *rawdoc.Node, path string, f *findings) map[string]json.RawMessage {
	if n == nil {
		return nil
	}
	if n.Kind != rawdoc.Object {
		f.problem(path, "must be an object of argument name to value, not %s", kindName(n.Kind))
		return nil
	}
	out := make(map[string]json.RawMessage, len(n.Keys))
	folded := make(map[string]string, len(n.Keys))
	for i, k := range n.Keys {
		if strings.TrimSpace(k) == "" {
			f.problem(path, "must not contain a blank argument name")
			continue
		}
		if prev, dup := folded[wire.FoldName(k)]; dup {
			f.problem(join(path, k), "names the same argument as %s to an upstream that matches names case-insensitively", quote(prev))
			continue
		}
		folded[wire.FoldName(k)] = k
		b, err := json.Marshal(expandedValue(n.Vals[i]))
		if err != nil {
			f.problem(join(path, k), "cannot be encoded as JSON")
			continue
		}
		out[k] = b
	}
	return out
}

// expandedValue is n as a value encoding/json writes, strings after $VAR
// expansion and numbers as written.
func expandedValue(n *rawdoc.Node) any {
	switch n.Kind {
	case rawdoc.Bool:
		return n.Bool
	case rawdoc.Number:
		return json.Number(n.Text)
	case rawdoc.String:
		return n.Value
	case rawdoc.Array:
		out := make([]any, len(n.Items))
		for i, item := range n.Items {
			out[i] = expandedValue(item)
		}
		return out
	case rawdoc.Object:
		out := make(map[string]any, len(n.Keys))
		for i, k := range n.Keys {
			out[k] = expandedValue(n.Vals[i])
		}
		return out
	}
	return nil
}

// uniqueExposedNames records a problem for every override whose exposed
// name another entry of the same tools map (keys in file order) already
// uses, renamed or not: both would be listed under one visible name.
func uniqueExposedNames(keys []string, tools map[string]ToolOverride, f *findings) {
	owner := make(map[string]string, len(keys))
	for _, raw := range keys {
		ov, ok := tools[raw]
		if !ok {
			continue
		}
		name := raw
		if ov.Name != "" {
			name = ov.Name
		}
		if prev, dup := owner[name]; dup {
			renamed, other := raw, prev
			if ov.Name == "" {
				renamed, other = prev, raw // the earlier entry took this tool's own name
			}
			f.problem(join(join("tools", renamed), "name"), "MCP tool name %s is also the exposed name of tools.%s", quote(name), quote(other))
			continue
		}
		owner[name] = raw
	}
}
