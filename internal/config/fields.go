package config

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/secret"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
)

// findings collects the problems and warnings of one server or of the top
// level.
type findings struct {
	server   string
	problems []Problem
	warnings []Problem
}

func (f *findings) problem(field, format string, args ...any) {
	f.problems = append(f.problems, Problem{Server: f.server, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (f *findings) warn(field, format string, args ...any) {
	f.warnings = append(f.warnings, Problem{Server: f.server, Field: field, Message: fmt.Sprintf(format, args...)})
}

// object reads the keys of one object node, recording type problems against
// their dotted paths and remembering which keys were consumed.
type object struct {
	n    *rawdoc.Node
	path string
	f    *findings
	used map[string]bool
}

// objectAt returns a reader for n, or nil (with a problem) when n is not an
// object. A null or absent n yields nil without a problem.
func objectAt(n *rawdoc.Node, path string, f *findings) *object {
	if n == nil || n.Kind == rawdoc.Null {
		return nil
	}
	if n.Kind != rawdoc.Object {
		f.problem(path, "must be an object")
		return nil
	}
	return &object{n: n, path: path, f: f, used: map[string]bool{}}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (o *object) field(key string) string { return join(o.path, key) }

// take returns key's value and marks the key as known. It returns nil when
// the key is absent or null, so null always means "use the default".
func (o *object) take(key string) *rawdoc.Node {
	o.used[key] = true
	n := o.n.Get(key)
	if n == nil || n.Kind == rawdoc.Null {
		return nil
	}
	return n
}

// has reports whether key is present with a non-null value.
func (o *object) has(key string) bool {
	n := o.n.Get(key)
	return n != nil && n.Kind != rawdoc.Null
}

// present marks key as known and reports whether it is present with a
// non-null value.
func (o *object) present(key string) bool {
	o.used[key] = true
	return o.has(key)
}

// rejectUnknown records a problem for every key that was not taken (the
// strict rule of the mux blocks and of routing/task_toolsets).
func (o *object) rejectUnknown() {
	for _, k := range o.n.Keys {
		if !o.used[k] {
			if lk := likelyKey(k, knownOf(o)); lk != "" {
				o.f.problem(o.field(k), "unknown key; did you mean %q?", lk)
			} else {
				o.f.problem(o.field(k), "unknown key")
			}
		}
	}
}

// extras returns the keys that were not taken, verbatim as written.
func (o *object) extras() map[string]json.RawMessage {
	var out map[string]json.RawMessage
	for i, k := range o.n.Keys {
		if o.used[k] {
			continue
		}
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		out[k] = o.n.Vals[i].JSON()
	}
	return out
}

func (o *object) str(key, def string) string {
	n := o.take(key)
	if n == nil {
		return def
	}
	if n.Kind != rawdoc.String {
		o.f.problem(o.field(key), "must be a string, not %s", kindName(n.Kind))
		return def
	}
	return n.Value
}

func (o *object) secret(key string) secret.Value {
	return secret.Value(o.str(key, ""))
}

func (o *object) boolean(key string, def bool) bool {
	n := o.take(key)
	if n == nil {
		return def
	}
	if n.Kind != rawdoc.Bool {
		o.f.problem(o.field(key), "must be a boolean, not %s", kindName(n.Kind))
		return def
	}
	return n.Bool
}

// oneOf reads a string that must be one of allowed.
func (o *object) oneOf(key, def string, allowed ...string) string {
	if !o.has(key) {
		o.take(key)
		return def
	}
	before := len(o.f.problems)
	v := o.str(key, def)
	if len(o.f.problems) > before {
		return def
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	o.f.problem(o.field(key), "must be one of %s", quoteList(allowed))
	return def
}

// strList reads a list of strings; nil when absent or null.
func (o *object) strList(key string) []string {
	n := o.take(key)
	if n == nil {
		return nil
	}
	return stringList(n, o.field(key), o.f)
}

func stringList(n *rawdoc.Node, path string, f *findings) []string {
	if n.Kind != rawdoc.Array {
		f.problem(path, "must be a list of strings, not %s", kindName(n.Kind))
		return nil
	}
	out := make([]string, 0, len(n.Items))
	for i, item := range n.Items {
		if item.Kind != rawdoc.String {
			f.problem(fmt.Sprintf("%s[%d]", path, i), "must be a string, not %s", kindName(item.Kind))
			continue
		}
		out = append(out, item.Value)
	}
	return out
}

// entry is one key/value of a string map, in file order.
type entry struct{ key, val, unsetVar string } // unsetVar: the $VAR val named, when not set

// strMap reads an object of string values, in file order. ok is false when
// the key is absent or null.
func (o *object) strMap(key string) (entries []entry, ok bool) {
	n := o.take(key)
	if n == nil {
		return nil, false
	}
	path := o.field(key)
	if n.Kind != rawdoc.Object {
		o.f.problem(path, "must be an object of strings, not %s", kindName(n.Kind))
		return nil, true
	}
	entries = make([]entry, 0, len(n.Keys))
	for i, k := range n.Keys {
		v := n.Vals[i]
		if v.Kind != rawdoc.String {
			o.f.problem(join(path, k), "must be a string, not %s", kindName(v.Kind))
			continue
		}
		entries = append(entries, entry{k, v.Value, v.Unset})
	}
	return entries, true
}

func secretMap(entries []entry) map[string]secret.Value {
	if entries == nil {
		return nil
	}
	out := make(map[string]secret.Value, len(entries))
	for _, e := range entries {
		out[e.key] = secret.Value(e.val)
	}
	return out
}

// number reads a finite number; ok is false when absent/null or invalid.
func (o *object) number(key string) (v float64, ok bool) {
	n := o.take(key)
	if n == nil || !o.isNumber(key, n) {
		return 0, false
	}
	f, err := strconv.ParseFloat(n.Text, 64)
	if (err != nil && !isRangeErr(err)) || math.IsInf(f, 0) || math.IsNaN(f) {
		o.f.problem(o.field(key), "must be a finite number")
		return 0, false
	}
	return f, true
}

// isNumber reports whether key's value n is a number, recording the
// problem when it is not.
func (o *object) isNumber(key string, n *rawdoc.Node) bool {
	switch n.Kind {
	case rawdoc.Number:
		return true
	case rawdoc.Bool:
		o.f.problem(o.field(key), "must be a number, not a boolean")
	default:
		o.f.problem(o.field(key), "must be a number, not %s", kindName(n.Kind))
	}
	return false
}

// isRangeErr reports whether err is strconv's out-of-range error.
func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// integer reads a whole number; the raw literal is returned for messages.
func (o *object) integer(key string) (v float64, literal string, ok bool) {
	n := o.n.Get(key)
	f, ok := o.number(key)
	if !ok {
		return 0, "", false
	}
	if f != math.Trunc(f) {
		o.f.problem(o.field(key), "must be a whole number")
		return 0, "", false
	}
	return f, n.Text, true
}

// intInRange reads a whole number that must lie in [lo, hi].
func (o *object) intInRange(key string, def, lo, hi int) int {
	f, _, ok := o.integer(key)
	if !ok {
		return def
	}
	if f < float64(lo) || f > float64(hi) {
		o.f.problem(o.field(key), "must be between %d and %d", lo, hi)
		return def
	}
	return int(f)
}

// secondsInRange reads a duration in seconds that must lie in [lo, hi].
func (o *object) secondsInRange(key string, def time.Duration, lo, hi float64) time.Duration {
	f, ok := o.number(key)
	if !ok {
		return def
	}
	if f < lo || f > hi {
		o.f.problem(o.field(key), "must be between %g and %g seconds", lo, hi)
		return def
	}
	return time.Duration(f * float64(time.Second))
}

// timeout reads a DeerFlow timeout: a finite number of seconds > 0, or null
// meaning "no limit" (0). Absent yields def.
func (o *object) timeout(key string, def time.Duration) time.Duration {
	n := o.n.Get(key)
	if n == nil {
		o.used[key] = true
		return def
	}
	if n.Kind == rawdoc.Null {
		o.used[key] = true
		return 0
	}
	f, ok := o.number(key)
	if !ok {
		return def
	}
	if f <= 0 {
		o.f.problem(o.field(key), "must be greater than 0 (or null for no limit)")
		return def
	}
	if f*float64(time.Second) >= math.MaxInt64 {
		o.f.problem(o.field(key), "is too large")
		return def
	}
	return max(time.Duration(f*float64(time.Second)), time.Nanosecond)
}

// checkHTTPURL reports whether s is an absolute http or https URL. It never
// includes s in the problem, since URLs can carry credentials.
func checkHTTPURL(s, path string, f *findings) bool {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		f.problem(path, "must be an absolute http or https URL")
		return false
	}
	return true
}

// kindNames are the kinds as problems name them.
var kindNames = [...]string{
	rawdoc.Null:   "null",
	rawdoc.Bool:   "a boolean",
	rawdoc.Number: "a number",
	rawdoc.String: "a string",
	rawdoc.Array:  "a list",
	rawdoc.Object: "an object",
}

// kindName names a kind in a problem ("a string", "null", …).
func kindName(k rawdoc.Kind) string { return kindNames[k] }

// quoteList renders allowed values as "'a', 'b' or 'c'".
func quoteList(vals []string) string {
	out := ""
	for i, v := range vals {
		switch {
		case i == 0:
		case i == len(vals)-1:
			out += " or "
		default:
			out += ", "
		}
		out += "'" + v + "'"
	}
	return out
}

// quote renders a key (never a value) the way DeerFlow's messages do, falling
// back to Go quoting when the text has quotes or unprintable characters.
func quote(s string) string {
	if strings.ContainsFunc(s, needsGoQuote) {
		return strconv.Quote(s)
	}
	return "'" + s + "'"
}

// needsGoQuote reports whether r cannot stand inside DeerFlow's single
// quotes: a control character, a quote, a backslash or non-ASCII.
func needsGoQuote(r rune) bool {
	return r < 0x20 || r == 0x7f || r == '\'' || r == '\\' || r >= 0x80
}
