package config

import (
	"fmt"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
)

// parseRules reads the list of rules at o's key "rules" (limits, policy,
// approvals): each an object that read fills, reporting its name and
// whether it is valid; names are unique, and max (when > 0) bounds the
// list. The valid rules are returned in order; nil when there is no list.
func parseRules[R any](o *object, max int, read func(*object) (R, string, bool)) []R {
	n := o.take("rules")
	if n == nil {
		return nil
	}
	if n.Kind != rawdoc.Array {
		o.f.problem(o.field("rules"), "must be a list of rules, not %s", kindName(n.Kind))
		return nil
	}
	if max > 0 && len(n.Items) > max {
		o.f.problem(o.field("rules"), "has %d rules; at most %d", len(n.Items), max)
		return nil
	}
	var rules []R
	seen := map[string]bool{}
	for i, item := range n.Items {
		p := fmt.Sprintf("%s[%d]", o.field("rules"), i)
		ro := objectAt(item, p, o.f)
		if ro == nil {
			if item.Kind == rawdoc.Null {
				o.f.problem(p, "must be an object")
			}
			continue
		}
		r, name, ok := read(ro)
		ro.rejectUnknown()
		if name != "" && seen[name] {
			o.f.problem(ro.field("name"), "%q names another rule too; rule names must be unique", name)
			ok = false
		}
		seen[name] = true
		if ok {
			rules = append(rules, r)
		}
	}
	return rules
}
