// Package headercheck holds the rules for HTTP header names and values that
// mcp-mux enforces both when a config is loaded (package config) and when
// headers are resolved for a call (package headers). It is a leaf: it imports
// nothing of this module and does no I/O.
//
// Errors describe what is wrong with a value but never repeat the value
// itself, because header values are usually credentials.
package headercheck

import "errors"

// Reasons returned by CheckValue, matching DeerFlow's illegal_header_value_reason.
const (
	reasonNonASCII   = "contains characters outside ASCII"
	reasonControl    = "contains a line break or another forbidden control character"
	reasonWhitespace = "has leading or trailing whitespace"
)

// CheckValue reports whether v can be sent as an HTTP header value. The
// returned error's text is only the reason (e.g. "contains characters outside
// ASCII"), never the value. Accepted: the empty string, internal spaces and
// tabs, and DEL (0x7f). Rejected: bytes outside ASCII, control characters other
// than tab (NUL, CR, LF, VT, FF, …), and leading or trailing space or tab.
func CheckValue(v string) error {
	switch {
	case hasNonASCII(v):
		return errors.New(reasonNonASCII)
	case hasControl(v):
		return errors.New(reasonControl)
	case hasOuterBlank(v):
		return errors.New(reasonWhitespace)
	}
	return nil
}

// hasNonASCII reports whether v has a byte outside ASCII.
func hasNonASCII(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] >= 0x80 {
			return true
		}
	}
	return false
}

// hasControl reports whether v has a control character other than tab.
func hasControl(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' {
			return true
		}
	}
	return false
}

// hasOuterBlank reports whether v starts or ends with a space or tab.
func hasOuterBlank(v string) bool {
	return v != "" && (isBlank(v[0]) || isBlank(v[len(v)-1]))
}

// CheckName reports whether name is a valid HTTP header field name: a
// non-empty RFC 7230 token.
func CheckName(name string) error {
	if name == "" {
		return errors.New("header name must not be empty")
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return errors.New("header name contains a character that is not allowed in an HTTP header name")
		}
	}
	return nil
}

// isBlank reports whether c is a space or tab.
func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// isTokenChar reports whether c is an RFC 7230 tchar.
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}
