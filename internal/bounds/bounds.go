// Package bounds holds the documented maximum of every value a caller
// chooses — a name, an id, a header — and the normal form the edges of
// mcp-mux give it before any metric label, span attribute, audit record,
// stored record or upstream request sees it.
//
// An edge checks a value once (Text, ID) and refuses the request past its
// bound with an *Error that names the field and the bound, never the
// value. What a room records of a value it cannot refuse (a name that is
// not in the caller's view) is its Label or its Clip.
package bounds

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// The bounds, in bytes. docs/security.md's "Bounds on what a caller chooses" table lists each with what a
// caller gets past it.
const (
	// ID bounds a JSON-RPC request id as sent (its JSON text).
	ID = 128
	// Name bounds a tool or prompt name: the catalog's names are at most
	// 128 bytes (^[A-Za-z0-9_-]{1,128}$), so a longer one names nothing.
	Name = 128
	// URI bounds a resource URI (read, subscribe).
	URI = 8 << 10
	// Thread bounds a thread id (inbound.thread_header).
	Thread = 255
	// Session bounds an Mcp-Session-Id.
	Session = 128
	// User bounds a caller's user id (a trusted header, a JWT claim).
	User = 256
	// ProgressToken bounds a request's _meta.progressToken (JSON text).
	ProgressToken = 128
	// Cursor bounds a list request's cursor.
	Cursor = 4 << 10
	// LastEventID bounds a Last-Event-ID header.
	LastEventID = 256
	// Profile bounds a profile name (path, header, claim).
	Profile = 128
	// Reason bounds a denial reason as an audit record or the status page
	// keeps it: mcp-mux's own text, which may quote a caller's value.
	Reason = 1 << 10
	// SessionThreads bounds how many threads one 2025-11-25 session's
	// record keeps (as digests, the newest first used): task events of an
	// older one no longer reach the session on every replica.
	SessionThreads = 64
)

// Unknown is the label a name not in the caller's view gets in metrics
// and spans: one value, however many names callers invent.
const Unknown = "_unknown"

// Error is a value refused at the edge. Its text names the field and the
// bound, never the value.
type Error struct {
	Field string // "X-Mux-Thread-Id", "id", "params.name", …
	Len   int    // the value's length in bytes; 0 for a bad byte
	Max   int
}

func (e *Error) Error() string {
	if e.Len > e.Max {
		return fmt.Sprintf("%s is %d bytes long; mcp-mux accepts at most %d bytes", e.Field, e.Len, e.Max)
	}
	return fmt.Sprintf("%s must be printable text (no control characters or invalid UTF-8)", e.Field)
}

// Text checks a caller-chosen string: at most max bytes of printable ASCII
// (space through tilde). Its error names field.
func Text(field, v string, max int) error {
	if len(v) > max {
		return &Error{Field: field, Len: len(v), Max: max}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return &Error{Field: field, Max: max}
		}
	}
	return nil
}

// Printable checks a caller-chosen string that may hold any language: at
// most max bytes of valid UTF-8 with no control characters (C0, DEL, C1).
// Its error names field.
func Printable(field, v string, max int) error {
	if len(v) > max {
		return &Error{Field: field, Len: len(v), Max: max}
	}
	for _, r := range v {
		if r == utf8.RuneError || r < 0x20 || (r >= 0x7f && r < 0xa0) {
			return &Error{Field: field, Max: max}
		}
	}
	return nil
}

// Label is name as a metric label or span attribute: itself when known
// (in the caller's view), else Unknown.
func Label(name string, known bool) string {
	if known {
		return name
	}
	return Unknown
}

// Clip is s cut to at most max bytes (on a rune boundary) with a note of
// its full length, for records that keep an unknown name: what a caller
// sent is seen, within a bound.
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}
