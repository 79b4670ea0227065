// Package paramheader writes and checks the Mcp-Param-* headers of the
// 2026-07-28 revision.
//
// A 2026-07-28 server may annotate string, integer and boolean properties
// of a tool's inputSchema with x-mcp-header: a tools/call then carries the
// argument's value in the header Mcp-Param-{name} too, and the server checks
// that the two agree. mcp-mux never forwards a caller's Mcp-Param-* headers:
// it checks a 2026-07-28 caller's against the arguments (Headers.Check, as
// a server must) and writes the upstream's from the call's arguments
// (Headers.Set), as the SDK client does, so what the upstream sees is
// always the argument. The upstream's annotations are read once per
// discovered tool list (Index), not per call. Values are tool arguments:
// they are never logged.
//
// Encoding (SEP-2243): integers in decimal, booleans as true/false, strings
// as they are unless they hold a byte outside printable ASCII (0x20–0x7E),
// start or end with a space or tab, or already look like the encoded form;
// those are sent as "=?base64?" + base64(UTF-8 bytes) + "?=". No CR or LF
// can reach a header.
package paramheader

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

const (
	paramHeaderPrefix  = "Mcp-Param-"
	maxParamHeaders    = 32       // annotations of one tool; a tool with more gets none
	maxParamDepth      = 8        // nesting of annotated properties
	maxParamName       = 128      // bytes of an annotation's header name
	maxParamValue      = 8 << 10  // bytes of one encoded value
	maxParamTotal      = 32 << 10 // bytes of all of a call's generated values
	maxSafeInteger     = 1<<53 - 1
	base64Prefix       = "=?base64?"
	base64Suffix       = "?="
	codeHeaderMismatch = -32020 // the 2026-07-28 revision's header mismatch
)

// Headers are the x-mcp-header bindings of one tool, as its listed schema
// declares them: one per annotated property.
type Headers []binding

// binding is one annotated property: its path in the arguments and the
// canonical name of the header that carries it.
type binding struct {
	path   []string
	header string
}

// Index maps a raw tool name to its bindings.
type Index map[string]Headers

// Add reads the annotations of the tool name (its JSON as listed) into ix;
// false when they are invalid (on a non-primitive property, not a token,
// duplicated, too many, too deep): the tool then gets none, as the SDK
// client would not list it at all.
func (ix *Index) Add(name string, tool json.RawMessage) bool {
	h, ok := read(tool)
	if len(h) == 0 {
		return ok
	}
	if *ix == nil {
		*ix = make(Index)
	}
	(*ix)[name] = h
	return true
}

// schemaProp is the part of an inputSchema property annotations need.
type schemaProp struct {
	Type       json.RawMessage       `json:"type"`
	Header     json.RawMessage       `json:"x-mcp-header"`
	Properties map[string]schemaProp `json:"properties"`
}

// read reads the bindings of one tool object (its JSON as listed); false
// when its annotations are invalid.
func read(tool json.RawMessage) (Headers, bool) {
	var head struct {
		InputSchema schemaProp `json:"inputSchema"`
	}
	if json.Unmarshal(tool, &head) != nil || len(head.InputSchema.Properties) == 0 {
		return nil, true
	}
	c := collector{seen: map[string]bool{}}
	if !c.collect(head.InputSchema.Properties, nil) {
		return nil, false
	}
	return c.out, true
}

// ForTool reads the annotations of a tool object (its JSON as listed). A
// tool whose annotations are invalid has none, as mcp-mux then sends its
// upstream none either.
func ForTool(tool json.RawMessage) Headers {
	h, _ := read(tool)
	return h
}

// collector gathers the bindings of one tool's schema.
type collector struct {
	seen map[string]bool // canonical header names bound so far
	out  Headers
}

// collect adds the bindings of props (at path prefix) and of their nested
// properties; false when an annotation is invalid.
func (c *collector) collect(props map[string]schemaProp, prefix []string) bool {
	if len(prefix) >= maxParamDepth {
		return !annotated(props) // deeper annotations are not followed
	}
	for name, p := range props {
		if !c.property(p, append(append(make([]string, 0, len(prefix)+1), prefix...), name)) {
			return false
		}
	}
	return true
}

// property adds the binding of the property p at path, if annotated, and
// those of its nested properties; false when an annotation is invalid.
func (c *collector) property(p schemaProp, path []string) bool {
	if p.Header != nil && !c.bind(p, path) {
		return false
	}
	return len(p.Properties) == 0 || c.collect(p.Properties, path)
}

// bind adds the binding of the annotated property p at path; false when
// its annotation is invalid, its header bound already or the tool's
// bindings are too many.
func (c *collector) bind(p schemaProp, path []string) bool {
	key, ok := headerOf(p)
	if !ok || c.seen[key] || len(c.out) == maxParamHeaders {
		return false
	}
	c.seen[key] = true
	c.out = append(c.out, binding{path: path, header: key})
	return true
}

// primitive lists the property types an annotation may bind.
var primitive = map[string]bool{"string": true, "integer": true, "boolean": true}

// headerOf returns the canonical header name the annotated property p
// binds; false when the annotation is not a valid name or p's type is not
// a primitive.
func headerOf(p schemaProp) (string, bool) {
	var h, typ string
	if json.Unmarshal(p.Header, &h) != nil || !validParamName(h) || json.Unmarshal(p.Type, &typ) != nil || !primitive[typ] {
		return "", false
	}
	return http.CanonicalHeaderKey(paramHeaderPrefix + h), true
}

// annotated reports whether any property in props (at any depth) has an
// x-mcp-header annotation.
func annotated(props map[string]schemaProp) bool {
	for _, p := range props {
		if p.Header != nil || annotated(p.Properties) {
			return true
		}
	}
	return false
}

// tchars are the bytes of an HTTP token (RFC 9110 tchar).
const tchars = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!#$%&'*+-.^_`|~"

// validParamName reports whether s is an HTTP token of bounded length.
func validParamName(s string) bool {
	return s != "" && len(s) <= maxParamName && strings.Trim(s, tchars) == ""
}

// Set adds to h the Mcp-Param-* headers of a tools/call with the given
// arguments, for the bindings h does not carry already. A value past the
// size bounds is an invalid-params error: the call is not sent.
func (p Headers) Set(h http.Header, arguments json.RawMessage) error {
	if len(p) == 0 {
		return nil
	}
	args := decodeArgs(arguments) // none for arguments that are no object: no header is set
	total := 0
	for _, b := range p {
		v, ok := b.value(h, args)
		if !ok {
			continue
		}
		total += len(v)
		if len(v) > maxParamValue || total > maxParamTotal {
			return &wire.Error{Code: -32602, Message: fmt.Sprintf(
				"the argument for %s is too large for a header (at most %d bytes each, %d in all, encoded)", b.header, maxParamValue, maxParamTotal)}
		}
		h[b.header] = []string{v}
	}
	return nil
}

// value is the header value b writes for args; false when h carries b's
// header already or args hold no primitive at b's path.
func (b binding) value(h http.Header, args map[string]json.RawMessage) (string, bool) {
	if _, sent := h[b.header]; sent {
		return "", false
	}
	raw, ok := lookupArg(args, b.path)
	if !ok {
		return "", false
	}
	return encodeParamValue(raw)
}

// lookupArg finds the value at path in the arguments.
func lookupArg(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	cur, ok := args[path[0]]
	for _, k := range path[1:] {
		if !ok {
			return nil, false
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return nil, false
		}
		cur, ok = obj[k]
	}
	return cur, ok
}

// encodeParamValue returns the header value of a JSON string, boolean or
// safe integer; false for anything else (null included).
func encodeParamValue(raw json.RawMessage) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return encodeParamString(x), true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		if !safeInteger(x) {
			return "", false
		}
		return strconv.FormatInt(int64(x), 10), true
	}
	return "", false
}

// encodeParamString encodes a string argument for a header.
func encodeParamString(s string) string {
	if needsBase64(s) {
		return base64Prefix + base64.StdEncoding.EncodeToString([]byte(s)) + base64Suffix
	}
	return s
}

// needsBase64 reports whether s must be sent encoded: it has surrounding
// space, a byte outside printable ASCII, or the encoded form already.
func needsBase64(s string) bool {
	if s == "" {
		return false
	}
	return blank(s[0]) || blank(s[len(s)-1]) || !printable(s) ||
		(strings.HasPrefix(s, base64Prefix) && strings.HasSuffix(s, base64Suffix))
}

// blank reports whether c is a space or a tab.
func blank(c byte) bool { return c == ' ' || c == '\t' }

// printable reports whether s is printable ASCII (0x20–0x7E) only.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Check validates a caller's Mcp-Param-* headers against the call's
// arguments as the 2026-07-28 revision requires of a server: a header of an
// annotated argument must carry its value (decoded from the =?base64?…?=
// form when so sent; integers compared as numbers), and none may be sent
// for an absent or null argument. A header the caller left out is no
// mismatch (mcp-mux writes the upstream's from the arguments), and one no
// annotation names is ignored: it is never forwarded. The error is a
// -32020 header mismatch naming the header, never its value.
func (p Headers) Check(h http.Header, arguments json.RawMessage) error {
	var args map[string]json.RawMessage
	for _, b := range p {
		got := h.Get(b.header)
		if got == "" {
			continue
		}
		if args == nil {
			args = decodeArgs(arguments)
		}
		if err := b.check(got, args); err != nil {
			return err
		}
	}
	return nil
}

// check compares the header value got, which the caller sent for b, with
// the argument at b's path: a -32020 error if it is absent, null or
// different.
func (b binding) check(got string, args map[string]json.RawMessage) error {
	arg := strings.Join(b.path, ".")
	raw, ok := lookupArg(args, b.path)
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return mismatch("header mismatch: %s was sent for the absent or null argument %q", b.header, arg)
	}
	if !paramMatches(got, raw) {
		return mismatch("header mismatch: %s does not match the argument %q", b.header, arg)
	}
	return nil
}

// decodeArgs decodes a call's arguments; empty when they are no object.
func decodeArgs(arguments json.RawMessage) map[string]json.RawMessage {
	var args map[string]json.RawMessage
	if json.Unmarshal(arguments, &args) != nil || args == nil {
		args = map[string]json.RawMessage{}
	}
	return args
}

// mismatch is the -32020 header mismatch error.
func mismatch(format string, args ...any) error {
	return &wire.Error{Code: codeHeaderMismatch, Message: fmt.Sprintf(format, args...)}
}

// paramMatches reports whether the header value v carries the primitive
// argument raw, as the SDK's server compares them.
func paramMatches(v string, raw json.RawMessage) bool {
	v, ok := decodeParamValue(v)
	if !ok {
		return false
	}
	var arg any
	if json.Unmarshal(raw, &arg) != nil {
		return false
	}
	switch x := arg.(type) {
	case string:
		return v == x
	case bool:
		return v == strconv.FormatBool(x)
	case float64:
		return sameInteger(v, x)
	}
	return false
}

// sameInteger reports whether v is the safe integer x, compared as numbers
// ("7.0" is 7).
func sameInteger(v string, x float64) bool {
	n, err := strconv.ParseFloat(v, 64)
	return err == nil && safeInteger(x) && safeInteger(n) && n == x
}

// decodeParamValue undoes the =?base64?…?= form of a header value (other
// values are returned as they are); false for a broken encoding.
func decodeParamValue(v string) (string, bool) {
	inner, ok := strings.CutPrefix(v, base64Prefix)
	if !ok {
		return v, true
	}
	if inner, ok = strings.CutSuffix(inner, base64Suffix); !ok {
		return v, true
	}
	b, err := base64.StdEncoding.DecodeString(inner)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// safeInteger reports whether x is an integer a JSON number carries
// exactly.
func safeInteger(x float64) bool {
	return !math.IsNaN(x) && !math.IsInf(x, 0) && x == math.Trunc(x) && math.Abs(x) <= maxSafeInteger
}
