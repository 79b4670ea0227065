package reload

import (
	"bytes"
	"reflect"

	"github.com/mcp-mux/mcp-mux/internal/config"
)

// Changes says what a reload changes in the file, for the status page's
// recent reloads: one line per server added, removed, enabled, disabled or
// changed (the new file's valid servers in file order, then its invalid
// ones, then the removed ones), then one per top-level block changed. A server's line says
// whether its connection settings changed (it reconnects), its pin_tools
// changed, or only the rest (description, routing, tools, …), and whether
// its entry is invalid.
// Lines name servers and blocks, never a value. old nil: nothing ran.
func Changes(old, next *config.Config) []string {
	if old == nil || next == nil {
		return nil
	}
	was := entries(old)
	var out []string
	now := entries(next)
	for _, name := range now.order {
		out = append(out, serverChange(name, was.byName[name], now.byName[name])...)
	}
	for _, name := range was.order {
		if _, ok := now.byName[name]; !ok {
			out = append(out, "removed "+name)
		}
	}
	return append(out, blockChanges(old, next)...)
}

// entry is one server as the file has it: valid (server set) or invalid.
type entry struct {
	server  *config.Server
	invalid bool
}

// entryList is a file's servers, valid and invalid, by name and in order.
type entryList struct {
	order  []string
	byName map[string]entry
}

func entries(c *config.Config) entryList {
	l := entryList{byName: make(map[string]entry, len(c.Servers)+len(c.Invalid))}
	for _, s := range c.Servers {
		l.order = append(l.order, s.Name)
		l.byName[s.Name] = entry{server: s}
	}
	for _, se := range c.Invalid {
		if _, dup := l.byName[se.Name]; !dup {
			l.order = append(l.order, se.Name)
		}
		l.byName[se.Name] = entry{invalid: true}
	}
	return l
}

// serverChange is the line of one server of the new file (none when it is
// unchanged); before is its old entry (the zero entry when new).
func serverChange(name string, before, after entry) []string {
	switch {
	case before.server == nil && !before.invalid:
		return []string{"added " + name + addedNote(after)}
	case after.invalid && before.invalid:
		return nil
	case after.invalid:
		return []string{"changed " + name + " (now invalid)"}
	case before.invalid:
		return []string{"changed " + name + " (valid again)" + disabledNote(after.server)}
	}
	b, a := before.server, after.server
	switch {
	case b.Enabled && !a.Enabled:
		return []string{"disabled " + name}
	case !b.Enabled && a.Enabled:
		return []string{"enabled " + name}
	case b.Fingerprint() != a.Fingerprint():
		return []string{"changed " + name + " (connection settings: reconnects)"}
	case b.PinTools != a.PinTools:
		return []string{"changed " + name + " (pin_tools)"}
	case !bytes.Equal(b.Raw, a.Raw):
		return []string{"changed " + name}
	}
	return nil
}

func addedNote(e entry) string {
	if e.invalid {
		return " (invalid)"
	}
	return disabledNote(e.server)
}

func disabledNote(s *config.Server) string {
	if s != nil && !s.Enabled {
		return " (disabled)"
	}
	return ""
}

// blockChanges are the lines of the top-level blocks that differ.
func blockChanges(old, next *config.Config) []string {
	var out []string
	for _, b := range []struct {
		name string
		a, b any
	}{
		{"mcpInterceptors", old.Interceptors, next.Interceptors},
		{"guardrails", old.Guardrails, next.Guardrails},
		{"tool_search", old.ToolSearch, next.ToolSearch},
		{"mcp_tasks", old.Tasks, next.Tasks},
		{"store", old.Store, next.Store},
		{"inbound", old.Inbound, next.Inbound},
		{"admin", old.Admin, next.Admin},
		{"telemetry", old.Telemetry, next.Telemetry},
		{"profiles", old.Profiles, next.Profiles},
		{"limits", old.Limits, next.Limits},
		{"policy", old.Policy, next.Policy},
		{"approvals", plainApprovals(old.Approvals), plainApprovals(next.Approvals)},
		{"processors", old.Processors, next.Processors},
		{"result_guards", old.ResultGuards, next.ResultGuards},
	} {
		if !reflect.DeepEqual(b.a, b.b) {
			out = append(out, "changed "+b.name)
		}
	}
	return out
}

// plainApprovals is a's rules as written (without their compiled
// conditions, which compare unequal however alike).
func plainApprovals(a config.Approvals) []config.ApprovalRule {
	out := make([]config.ApprovalRule, len(a.Rules))
	for i, r := range a.Rules {
		r.Cond = nil
		out[i] = r
	}
	return out
}
