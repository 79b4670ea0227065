// Package resultguard is the pure work of the built-in result guards on
// one tools/call result (a CallToolResult as raw JSON): redaction of
// credentials in what the model reads (text content, embedded resources'
// text, structuredContent's strings), the result's size in characters,
// and its truncation to a budget as a result that is still valid, with a
// marker saying what was cut. It does no I/O: the call path decides what
// to do with a result over its budget, and package spill keeps the full
// one.
package resultguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// ErrNotResult reports a result that is not a CallToolResult object with
// a content array: such a result is passed on as it is.
var ErrNotResult = errors.New("not a tool result with content")

// Result is one CallToolResult being guarded: the members the guards do
// not touch are kept as they came.
type Result struct {
	members    map[string]json.RawMessage
	content    []map[string]json.RawMessage
	structured json.RawMessage // nil: none
}

// Parse reads a CallToolResult.
func Parse(raw json.RawMessage) (*Result, error) {
	var r Result
	if json.Unmarshal(raw, &r.members) != nil || r.members == nil {
		return nil, ErrNotResult
	}
	c, ok := r.members["content"]
	if !ok || json.Unmarshal(c, &r.content) != nil {
		return nil, ErrNotResult
	}
	if sc, ok := r.members["structuredContent"]; ok && string(sc) != "null" {
		r.structured = sc
	}
	return &r, nil
}

// JSON is the result as it is now.
func (r *Result) JSON() (json.RawMessage, error) {
	c, err := marshal(r.content)
	if err != nil {
		return nil, fmt.Errorf("encoding the result's content: %w", err)
	}
	r.members["content"] = c
	if r.structured == nil {
		delete(r.members, "structuredContent")
	} else {
		r.members["structuredContent"] = r.structured
	}
	out, err := marshal(r.members)
	if err != nil {
		return nil, fmt.Errorf("encoding the result: %w", err)
	}
	return out, nil
}

// Redact replaces, in every text block's text, every embedded resource's
// text and every string of structuredContent, the values sc knows (nil:
// none) and the credential-shaped strings secret.RedactTokens finds. It
// returns how many it replaced.
func (r *Result) Redact(sc *secret.Scrubber) int {
	n := 0
	for _, b := range r.content {
		n += redactMember(b, "text", sc)
		if res, ok := b["resource"]; ok {
			var m map[string]json.RawMessage
			if json.Unmarshal(res, &m) != nil || m == nil {
				continue
			}
			if k := redactMember(m, "text", sc); k > 0 {
				b["resource"] = marshalValue(m) // members that were JSON
				n += k
			}
		}
	}
	if r.structured != nil {
		red, k := redactValue(r.structured, sc)
		r.structured, n = red, n+k
	}
	return n
}

// redactMember redacts the string member key of m; how many it replaced.
func redactMember(m map[string]json.RawMessage, key string, sc *secret.Scrubber) int {
	v, ok := m[key]
	if !ok {
		return 0
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return 0
	}
	red, n := redactString(s, sc)
	if n > 0 {
		m[key] = marshalString(red)
	}
	return n
}

// redactString is s without known values and credential-shaped strings.
func redactString(s string, sc *secret.Scrubber) (string, int) {
	s, n := sc.Redact(s) // linear, whatever the values (secret.Scrubber.Redact)
	s, k := secret.RedactTokens(s)
	return s, n + k
}

// redactValue redacts every string (member names kept) of the JSON value raw.
func redactValue(raw json.RawMessage, sc *secret.Scrubber) (json.RawMessage, int) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return raw, 0
	}
	n := 0
	v = walkStrings(v, func(s string) string {
		red, k := redactString(s, sc)
		n += k
		return red
	})
	if n == 0 {
		return raw, 0
	}
	return marshalValue(v), n
}

// walkStrings returns v with f applied to every string value.
func walkStrings(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case map[string]any:
		for k, c := range x {
			x[k] = walkStrings(c, f)
		}
	case []any:
		for i, c := range x {
			x[i] = walkStrings(c, f)
		}
	}
	return v
}

// Chars is the result's size as a budget counts it: the characters
// (runes) of its text blocks and embedded resources' text, plus the bytes
// of structuredContent as JSON. Images, audio and blobs are not counted.
func (r *Result) Chars() int {
	n := len(r.structured)
	for _, b := range r.content {
		if t, ok := textOf(b); ok {
			n += utf8.RuneCountInString(t)
		}
	}
	return n
}

// HasStructured reports whether the result carries structuredContent.
func (r *Result) HasStructured() bool { return r.structured != nil }

// Truncate cuts the result to budget characters: text is kept in order
// until the budget is spent, the block that spends it cut at a rune
// boundary, every later block dropped, and structuredContent dropped. It
// returns the characters kept.
func (r *Result) Truncate(budget int) int {
	left := max(budget, 0)
	r.structured = nil
	for i, b := range r.content {
		t, ok := textOf(b)
		if !ok {
			continue
		}
		n := utf8.RuneCountInString(t)
		if n <= left {
			left -= n
			continue
		}
		if left > 0 {
			setText(b, cutRunes(t, left))
			r.content = r.content[:i+1]
		} else {
			r.content = r.content[:i]
		}
		left = 0
		break
	}
	return max(budget, 0) - left
}

// Append adds a content block.
func (r *Result) Append(block map[string]json.RawMessage) { r.content = append(r.content, block) }

// TextBlock is a text content block.
func TextBlock(text string) map[string]json.RawMessage {
	return map[string]json.RawMessage{"type": json.RawMessage(`"text"`), "text": marshalString(text)}
}

// LinkBlock is a resource_link content block to uri, named name.
func LinkBlock(uri, name, description string) map[string]json.RawMessage {
	return map[string]json.RawMessage{"type": json.RawMessage(`"resource_link"`), "uri": marshalString(uri),
		"name": marshalString(name), "description": marshalString(description), "mimeType": json.RawMessage(`"application/json"`)}
}

// Marker is the text appended to a truncated result: its size, what was
// kept, and the setting whose bound cut it (and, when spilled, where the
// whole result is).
func Marker(chars, kept int, bound string, droppedStructured bool, uri string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[mcp-mux: result truncated: %d characters, %d kept", chars, kept)
	if droppedStructured {
		b.WriteString("; structuredContent dropped")
	}
	if uri != "" {
		b.WriteString("; the full result is the resource " + uri)
	}
	b.WriteString("; set by " + bound + "]")
	return b.String()
}

// MinHint is the smallest size a client's hint may ask for: a smaller one
// is ignored.
const MinHint = 1000

// HintKey is the _meta member a client sets to the largest result it
// wants, in characters.
const HintKey = "anthropic/maxResultSizeChars"

// Hint returns the result size a tools/call's _meta asks for (HintKey):
// 0 when there is none, it is not a whole number, or it is below MinHint.
func Hint(meta json.RawMessage) int {
	if len(meta) == 0 || !bytes.Contains(meta, []byte(HintKey)) {
		return 0
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return 0
	}
	v, err := strconv.ParseInt(string(m[HintKey]), 10, 64)
	if err != nil || v < MinHint {
		return 0
	}
	return int(min(v, 1<<40))
}

// textOf returns the text a block carries for the model: a text block's,
// an embedded resource's.
func textOf(b map[string]json.RawMessage) (string, bool) {
	raw, ok := b["text"]
	if !ok {
		res, isRes := b["resource"]
		if !isRes {
			return "", false
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(res, &m) != nil || m == nil {
			return "", false
		}
		if raw, ok = m["text"]; !ok {
			return "", false
		}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// setText replaces the text textOf found in b.
func setText(b map[string]json.RawMessage, s string) {
	if _, ok := b["text"]; ok {
		b["text"] = marshalString(s)
		return
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b["resource"], &m) // textOf decoded it
	m["text"] = marshalString(s)
	b["resource"] = marshalValue(m)
}

// cutRunes is s's first n runes.
func cutRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// marshalString is s as a JSON string, without HTML escaping.
func marshalString(s string) json.RawMessage { return marshalValue(s) }

// marshalValue is v (strings, numbers, maps and slices of them: it
// cannot fail) as JSON, without HTML escaping.
func marshalValue(v any) json.RawMessage {
	b, _ := marshal(v)
	return b
}

// marshal is v as JSON, without HTML escaping.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
