// Package safelog keeps control characters out of mcp-mux's log output.
// What mcp-mux logs includes text it does not control (a stdio server's
// stderr, upstream error text, tool names); written raw, an ESC or BEL in
// it would drive the terminal or pager that shows the log, and a newline
// would forge a log line. Writer escapes them in every entry, in both log
// formats, at the one place all entries pass through.
package safelog

import (
	"io"
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

type writer struct {
	w    io.Writer
	json bool
}

const hex = "0123456789abcdef"

func (e *writer) Write(p []byte) (int, error) {
	body, nl := p, false
	if n := len(body); n > 0 && body[n-1] == '\n' {
		body, nl = body[:n-1], true
	}
	if clean(body) {
		return e.w.Write(p)
	}
	out := make([]byte, 0, len(p)+32)
	for i := 0; i < len(body); {
		r, size := utf8.DecodeRune(body[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = e.byteEscape(out, body[i])
		case r < 0x20 || r == 0x7f:
			out = e.control(out, byte(r))
		case r >= 0x80 && r <= 0x9f:
			out = append(out, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
		default:
			out = append(out, body[i:i+size]...)
		}
		i += size
	}
	if nl {
		out = append(out, '\n')
	}
	if _, err := e.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (e *writer) control(out []byte, c byte) []byte {
	if e.json {
		if c == '\t' || c == '\n' || c == '\r' {
			return append(out, ' ') // raw, they can only be whitespace between tokens
		}
		return append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
	}
	switch c {
	case '\t':
		return append(out, '\\', 't')
	case '\n':
		return append(out, '\\', 'n')
	case '\r':
		return append(out, '\\', 'r')
	}
	return e.byteEscape(out, c)
}

func (e *writer) byteEscape(out []byte, c byte) []byte {
	if e.json {
		return append(out, `\ufffd`...) // JSON has no byte escape
	}
	return append(out, '\\', 'x', hex[c>>4], hex[c&0xf])
}

// clean reports whether b has nothing to escape: ASCII without controls,
// or valid UTF-8 without C1 controls.
func clean(b []byte) bool {
	ascii := true
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return false
		}
		if c >= 0x80 {
			ascii = false
		}
	}
	if ascii {
		return true
	}
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if (r == utf8.RuneError && size == 1) || (r >= 0x80 && r <= 0x9f) {
			return false
		}
		i += size
	}
	return true
}
