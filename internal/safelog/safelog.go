// Package safelog keeps control characters out of mcp-mux's log output.
// What mcp-mux logs includes text it does not control (a stdio server's
// stderr, upstream error text, tool names); written raw, an ESC or BEL in
// it would drive the terminal or pager that shows the log, and a newline
// would forge a log line. Writer escapes them in every entry, in both log
// formats, at the one place all entries pass through.
package safelog

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"
)

// Writer returns w with every log entry (one Write, as hclog writes them)
// escaped: C0 controls, DEL, C1 controls and invalid UTF-8 bytes become
// visible escapes, except the newline that ends the entry. Text entries
// get \t, \n, \r, \xNN and \u00NN; JSON entries, where encoding/json has
// already escaped C0 controls inside strings, get \u00NN for DEL and C1
// (bytes that occur only inside JSON strings, so the line stays valid) and
// a space for a raw tab or line break between tokens.
func Writer(w io.Writer, json bool) io.Writer { return &writer{w: w, json: json} }

// writer is Writer's io.Writer: it escapes each entry for its format.
type writer struct {
	w    io.Writer
	json bool
}

const hex = "0123456789abcdef"

// Write writes one log entry, escaped. An entry with nothing to escape is
// passed on as it is.
func (e *writer) Write(p []byte) (int, error) {
	body, nl := bytes.CutSuffix(p, []byte("\n"))
	if clean(body) {
		return e.w.Write(p)
	}
	out := e.escape(make([]byte, 0, len(p)+32), body)
	if nl {
		out = append(out, '\n')
	}
	if _, err := e.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// escape appends body to out, each rune escaped when it must be.
func (e *writer) escape(out, body []byte) []byte {
	for i := 0; i < len(body); {
		r, size := utf8.DecodeRune(body[i:])
		out = e.escapeRune(out, r, body[i:i+size])
		i += size
	}
	return out
}

// escapeRune appends the rune r, raw its encoding in the entry: an invalid
// byte, a C0 control or DEL, or a C1 control escaped, anything else as it
// is.
func (e *writer) escapeRune(out []byte, r rune, raw []byte) []byte {
	switch {
	case isInvalid(r, len(raw)):
		return e.byteEscape(out, raw[0])
	case isC0(r):
		return e.control(out, byte(r))
	case isC1(r):
		return appendU(out, byte(r))
	}
	return append(out, raw...)
}

// control appends the escape of the C0 control or DEL c for the format.
func (e *writer) control(out []byte, c byte) []byte {
	if e.json {
		return jsonControl(out, c)
	}
	return textControl(out, c)
}

// jsonControl escapes a raw control character of a JSON entry: a tab or
// line break can only be whitespace between tokens and becomes a space.
func jsonControl(out []byte, c byte) []byte {
	switch c {
	case '\t', '\n', '\r':
		return append(out, ' ')
	}
	return appendU(out, c)
}

// textControl escapes a control character of a text entry: \t, \n and \r
// by name, any other as \xNN.
func textControl(out []byte, c byte) []byte {
	if i := strings.IndexByte("\t\n\r", c); i >= 0 {
		return append(out, '\\', "tnr"[i])
	}
	return appendX(out, c)
}

// byteEscape appends the escape of an invalid UTF-8 byte for the format.
func (e *writer) byteEscape(out []byte, c byte) []byte {
	if e.json {
		return append(out, `\ufffd`...) // JSON has no byte escape
	}
	return appendX(out, c)
}

// appendU appends c as \u00NN.
func appendU(out []byte, c byte) []byte {
	return append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
}

// appendX appends c as \xNN.
func appendX(out []byte, c byte) []byte {
	return append(out, '\\', 'x', hex[c>>4], hex[c&0xf])
}

// isC0 reports whether r is a C0 control character or DEL.
func isC0(r rune) bool { return r < 0x20 || r == 0x7f }

// isC1 reports whether r is a C1 control character.
func isC1(r rune) bool { return r >= 0x80 && r <= 0x9f }

// isInvalid reports whether utf8.DecodeRune's r and size stand for an
// invalid byte.
func isInvalid(r rune, size int) bool { return r == utf8.RuneError && size == 1 }

// clean reports whether b has nothing to escape: ASCII without controls,
// or valid UTF-8 without C1 controls.
func clean(b []byte) bool {
	ascii, ok := scanBytes(b)
	return ok && (ascii || cleanUTF8(b))
}

// scanBytes reports whether b is all ASCII, and whether it is free of C0
// controls and DEL.
func scanBytes(b []byte) (ascii, ok bool) {
	ascii = true
	for _, c := range b {
		if isC0(rune(c)) {
			return false, false
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	return ascii, true
}

// cleanUTF8 reports whether b is valid UTF-8 without C1 controls.
func cleanUTF8(b []byte) bool {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if isInvalid(r, size) || isC1(r) {
			return false
		}
		i += size
	}
	return true
}
