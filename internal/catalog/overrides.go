package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Tool overrides (a server's tools.<raw> entries, config.Presentation): the
// override's name replaces the raw name before the server prefix, and its
// title, description, annotations and fixed arguments are applied to the
// tool object once, when the route is described. Everything that shows a
// tool reads that object and the route's name — tools/list of both eras,
// tool_search's index and results, routing hints, a submit tool's task
// contract — so an override is shown everywhere; calls still reach Raw,
// with the fixed arguments set (Route.Arguments) over every member of the
// caller's that an upstream could take for one of them.

// errArgsNotObject answers a call whose arguments are not a JSON object
// when the tool has fixed arguments to set in them.
var errArgsNotObject = errors.New("tool arguments must be a JSON object")

// exposedName is a raw tool's name before the prefix: its override's
// name, or raw.
func exposedName(sc *config.Server, raw string) string {
	if sc == nil {
		return raw
	}
	return sc.ExposedName(raw)
}

// presentationOf returns the raw tool's override presentation; the zero
// one when it has none.
func presentationOf(sc *config.Server, raw string) config.Presentation {
	if sc == nil {
		return config.Presentation{}
	}
	return sc.Tools[raw].Presentation
}

// overridden returns the tool object with p's title, description and
// annotations set and its fixed arguments left out of inputSchema. The
// object is returned as it is when p changes none of these or it does not
// decode.
func overridden(tool json.RawMessage, p config.Presentation) json.RawMessage {
	if p.Title == nil && p.Description == nil && p.Annotations == nil && len(p.FixedArguments) == 0 {
		return tool
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(tool, &obj); err != nil || obj == nil {
		return tool
	}
	if p.Title != nil {
		obj["title"], _ = json.Marshal(*p.Title)
	}
	if p.Description != nil {
		obj["description"], _ = json.Marshal(*p.Description)
	}
	if p.Annotations != nil {
		obj["annotations"] = withAnnotations(obj["annotations"], p.Annotations)
	}
	if len(p.FixedArguments) > 0 {
		obj["inputSchema"] = withoutProperties(obj["inputSchema"], p.FixedArguments)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return tool
	}
	return b
}

// withAnnotations returns the tool's annotations object (a new one when
// it has none or it does not decode) with the fields a sets.
func withAnnotations(raw json.RawMessage, a *config.ToolAnnotations) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		m = make(map[string]json.RawMessage, 5)
	}
	set := func(key string, v any) {
		m[key], _ = json.Marshal(v)
	}
	if a.Title != nil {
		set("title", *a.Title)
	}
	for key, v := range map[string]*bool{"readOnlyHint": a.ReadOnlyHint, "destructiveHint": a.DestructiveHint,
		"idempotentHint": a.IdempotentHint, "openWorldHint": a.OpenWorldHint} {
		if v != nil {
			set(key, *v)
		}
	}
	b, _ := json.Marshal(m) // values are valid JSON: they decoded or were marshalled
	return b
}

// withoutProperties returns an input schema without the fixed properties,
// in "properties" and in "required" (dropped when nothing is left). A
// schema that does not decode as an object is returned as it is.
func withoutProperties(schema json.RawMessage, fixed map[string]json.RawMessage) json.RawMessage {
	var s map[string]json.RawMessage
	if err := json.Unmarshal(schema, &s); err != nil || s == nil {
		return schema
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(s["properties"], &props); err == nil && props != nil {
		for k := range props {
			if isFixedName(fixed, k) {
				delete(props, k)
			}
		}
		s["properties"], _ = json.Marshal(props)
	}
	var req []json.RawMessage
	if err := json.Unmarshal(s["required"], &req); err == nil && req != nil {
		req = slices.DeleteFunc(req, func(item json.RawMessage) bool {
			var name string
			return json.Unmarshal(item, &name) == nil && isFixedName(fixed, name)
		})
		if len(req) == 0 {
			delete(s, "required")
		} else {
			s["required"], _ = json.Marshal(req)
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		return schema
	}
	return b
}

// fixedArgs are the arguments a tool's override sets in every call: their
// names folded (wire.FoldName), and the members as the upstream gets them,
// in name order.
type fixedArgs struct {
	folded  map[string]struct{}
	members []byte // "name":value,… (JSON text, no braces)
}

// newFixedArgs prepares an override's fixed arguments; nil for none.
func newFixedArgs(fixed map[string]json.RawMessage) *fixedArgs {
	if len(fixed) == 0 {
		return nil
	}
	f := &fixedArgs{folded: make(map[string]struct{}, len(fixed))}
	for _, name := range slices.Sorted(maps.Keys(fixed)) {
		f.folded[wire.FoldName(name)] = struct{}{}
		if len(f.members) > 0 {
			f.members = append(f.members, ',')
		}
		key, _ := json.Marshal(name)
		f.members = append(append(append(f.members, key...), ':'), fixed[name]...)
	}
	return f
}

// covers reports whether a caller's member name is one of the fixed
// arguments to a lenient decoder (wire.FoldName): "ſcope" and "SCOPE" are
// "scope" to Go's encoding/json.
func (f *fixedArgs) covers(name string) bool {
	_, ok := f.folded[wire.FoldName(name)]
	return ok
}

// isFixedName reports whether name is one of the fixed arguments, as a
// lenient decoder matches names: a property the caller cannot set is not
// listed.
func isFixedName(fixed map[string]json.RawMessage, name string) bool {
	for k := range fixed {
		if wire.FoldName(k) == wire.FoldName(name) {
			return true
		}
	}
	return false
}

// Arguments returns a call's arguments as the upstream gets them, or an
// error for the caller (invalid params). Arguments in which an object
// repeats a member name are refused: decoders differ on which one counts.
// A tool without fixed arguments gets args as they are. For one with
// fixed arguments, every member of the caller's that a lenient decoder
// would take for a fixed one (wire.FoldName) is dropped, the others are
// kept as written and in order, and the fixed ones follow; absent or null
// args become an object of the fixed ones, and arguments that are not a
// JSON object are an error.
func (r *Route[S]) Arguments(args json.RawMessage) (json.RawMessage, error) {
	if r.fixed == nil {
		if err := wire.CheckNames(args); err != nil {
			return nil, argumentsError(err)
		}
		return args, nil
	}
	members, err := wire.Members(args)
	if err != nil {
		return nil, argumentsError(err)
	}
	if t := bytes.TrimSpace(args); len(t) > 0 && string(t) != "null" && t[0] != '{' {
		return nil, errArgsNotObject
	}
	out := make([]byte, 0, len(args)+len(r.fixed.members)+2)
	out = append(out, '{')
	for _, m := range members {
		if r.fixed.covers(m.Name) {
			continue
		}
		out = append(append(out, m.Raw...), ',')
	}
	out = append(append(out, r.fixed.members...), '}')
	return out, nil
}

// argumentsError is the caller's error for arguments wire refused; a
// repeated name is named, clipped to bounds.Name.
func argumentsError(err error) error {
	var dup *wire.DuplicateNameError
	switch {
	case errors.As(err, &dup):
		return fmt.Errorf("arguments repeat the member name %q", bounds.Clip(dup.Name, bounds.Name))
	case errors.Is(err, wire.ErrTooDeep):
		return fmt.Errorf("arguments: %w", err)
	}
	return errors.New("arguments must be valid JSON")
}
