// Package secret provides Value, the one type mcp-mux uses to hold a
// credential in memory, and the redaction of credentials from text:
// RedactURL for URLs (user info, query values) and Scrubber for removing
// known credential values from error text.
//
// A Value never prints its plaintext: fmt verbs, JSON encoding and slog all
// render it as [REDACTED]. The only way to read it is Reveal, so every place
// that needs the plaintext (building an upstream request, comparing an API key)
// is explicit and easy to audit.
//
// The redaction relies on fmt, encoding/json and log/slog calling Value's
// methods, which they can only do through exported fields, map values, slices
// and direct arguments. Converting a Value to string, or storing it in an
// unexported struct field that is printed with %v, bypasses it.
package secret

import (
	"encoding/json"
	"fmt"
	"log/slog"
)

// Redacted is what a non-empty Value prints instead of its plaintext.
const Redacted = "[REDACTED]"

// Value is a credential (token, password, API key, header value) whose
// plaintext is only available through Reveal. The zero Value is empty and
// prints as "".
type Value string

// Reveal returns the plaintext. Call it only where the plaintext is sent or
// compared, never to log or display it.
func (v Value) Reveal() string { return string(v) }

// IsZero reports whether the value is empty.
func (v Value) IsZero() bool { return v == "" }

// String returns [REDACTED], or "" for an empty value.
func (v Value) String() string {
	if v == "" {
		return ""
	}
	return Redacted
}

// GoString returns the redacted form quoted, so %#v shows no plaintext.
func (v Value) GoString() string {
	return fmt.Sprintf("secret.Value(%q)", v.String())
}

// Format implements fmt.Formatter so that every verb (%v, %s, %q, %x, %#v, …)
// prints the redacted form.
func (v Value) Format(f fmt.State, verb rune) {
	var out string
	switch {
	case verb == 'v' && f.Flag('#'):
		out = v.GoString()
	case verb == 'q':
		out = fmt.Sprintf("%q", v.String())
	default:
		out = v.String()
	}
	_, _ = f.Write([]byte(out))
}

// MarshalJSON encodes the redacted form as a JSON string.
func (v Value) MarshalJSON() ([]byte, error) {
	return json.Marshal(v.String())
}

// UnmarshalJSON accepts a JSON string (or null, which yields an empty value).
func (v *Value) UnmarshalJSON(data []byte) error {
	var s *string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("secret value must be a JSON string")
	}
	if s == nil {
		*v = ""
		return nil
	}
	*v = Value(*s)
	return nil
}

// LogValue implements slog.LogValuer so structured logs show the redacted form.
func (v Value) LogValue() slog.Value {
	return slog.StringValue(v.String())
}
