package catalog

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"github.com/mcp-mux/mcp-mux/config"
)

// Tool overrides (a server's tools.<raw> entries, config.Presentation): the
// override's name replaces the raw name before the server prefix, and its
// title, description, annotations and fixed arguments are applied to the
// tool object once, when the route is described. Everything that shows a
// tool reads that object and the route's name — tools/list of both eras,
// tool_search's index and results, routing hints, a submit tool's task
// contract — so an override is shown everywhere; calls still reach Raw,
// with the fixed arguments set (Route.Arguments).

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
		for k := range fixed {
			delete(props, k)
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

// isFixedName reports whether name is one of the fixed arguments.
func isFixedName(fixed map[string]json.RawMessage, name string) bool {
	_, ok := fixed[name]
	return ok
}

// Arguments returns a call's arguments as the upstream gets them: args
// with the tool's fixed arguments set over the caller's. A tool without
// fixed arguments gets args as they are; absent or null args become an
// object of the fixed ones. Arguments that are not a JSON object are an
// error when there is something to set.
func (r *Route[S]) Arguments(args json.RawMessage) (json.RawMessage, error) {
	if len(r.fixed) == 0 {
		return args, nil
	}
	var m map[string]json.RawMessage
	if len(args) > 0 {
		if err := json.Unmarshal(args, &m); err != nil {
			return nil, errArgsNotObject
		}
	}
	if m == nil {
		m = make(map[string]json.RawMessage, len(r.fixed))
	}
	maps.Copy(m, r.fixed)
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return b, nil
}
