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
	return parseNamedList(o.take("rules"), o.field("rules"), o.f, "rule", max, read)
}

// parseNamedList reads n, a list at path of objects named uniquely (what
// says what they are: "rule", "processor"), as parseRules does.
func parseNamedList[R any](n *rawdoc.Node, path string, f *findings, what string, max int, read func(*object) (R, string, bool)) []R {
	if n == nil {
		return nil
	}
	if n.Kind != rawdoc.Array {
		f.problem(path, "must be a list of %ss, not %s", what, kindName(n.Kind))
		return nil
	}
	if max > 0 && len(n.Items) > max {
		f.problem(path, "has %d %ss; at most %d", len(n.Items), what, max)
		return nil
	}
	var rules []R
	seen := map[string]bool{}
	for i, item := range n.Items {
		p := fmt.Sprintf("%s[%d]", path, i)
		ro := objectAt(item, p, f)
		if ro == nil {
			if item.Kind == rawdoc.Null {
				f.problem(p, "must be an object")
			}
			continue
		}
		r, name, ok := read(ro)
		ro.rejectUnknown()
		if name != "" && seen[name] {
			f.problem(ro.field("name"), "%q names another %s too; %s names must be unique", name, what, what)
			ok = false
		}
		seen[name] = true
		if ok {
			rules = append(rules, r)
		}
	}
	return rules
}
