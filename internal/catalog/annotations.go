package catalog

import (
	"encoding/json"
	"sync"
)

// Annotations are a tool's effective annotations — as listed, after its
// override — with MCP's default for every hint the tool does not set:
// not read-only, destructive, not idempotent, open-world.
type Annotations struct {
	Title                                                        string
	ReadOnlyHint, DestructiveHint, IdempotentHint, OpenWorldHint bool
}

// annotSpec is a route's annotations, read from its listed tool on the
// first call that asks for them.
type annotSpec struct {
	once sync.Once
	a    Annotations
}

// Annotations returns the tool's effective annotations, read from its
// tool object once. A hint that is absent or not a boolean takes MCP's
// default.
func (r *Route[S]) Annotations() Annotations {
	r.annots.once.Do(func() { r.annots.a = annotationsOf(r.JSON) })
	return r.annots.a
}

// annotationsOf reads the annotations of a tool object, member by
// member.
func annotationsOf(tool json.RawMessage) Annotations {
	a := Annotations{DestructiveHint: true, OpenWorldHint: true}
	var t struct {
		Annotations map[string]json.RawMessage `json:"annotations"`
	}
	if json.Unmarshal(tool, &t) != nil {
		return a
	}
	m := t.Annotations
	_ = json.Unmarshal(m["title"], &a.Title) // absent or not a string: ""
	for key, dst := range map[string]*bool{"readOnlyHint": &a.ReadOnlyHint, "destructiveHint": &a.DestructiveHint,
		"idempotentHint": &a.IdempotentHint, "openWorldHint": &a.OpenWorldHint} {
		var v *bool // null, absent or not a boolean: the default
		if json.Unmarshal(m[key], &v) == nil && v != nil {
			*dst = *v
		}
	}
	return a
}
