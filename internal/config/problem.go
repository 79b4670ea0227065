package config

import (
	"errors"
	"strings"
)

// Problem is one validation finding: an error that invalidates a server or
// the file, or a warning. Messages never contain configured values that may
// be secrets.
type Problem struct {
	// Server is the mcpServers key, or "" for a top-level block.
	Server string
	// Field is a dotted path inside the server or from the top level, e.g.
	// "command", "oauth.token_url", "args[2]", "guardrails.allowed_tools".
	Field string
	// Message says what is wrong.
	Message string
}

// Error returns "server: field: message", omitting empty parts.
func (p Problem) Error() string { return p.Format("") }

// Format returns "file:server:field: message", omitting empty parts; it is
// the line `mcp-mux validate` prints.
func (p Problem) Format(file string) string {
	var parts []string
	for _, s := range []string{file, p.Server, p.Field} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return p.Message
	}
	sep := ":"
	if file == "" {
		sep = ": "
	}
	return strings.Join(parts, sep) + ": " + p.Message
}

// Problems returns every Problem in err's tree (as joined by Parse), in order.
func Problems(err error) []Problem {
	var out []Problem
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case Problem:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		default:
			if p := (Problem{}); errors.As(err, &p) {
				out = append(out, p)
			}
		}
	}
	walk(err)
	return out
}

// ServerError lists why one server was rejected. The server is skipped; the
// other servers are unaffected.
type ServerError struct {
	Name     string
	Problems []Problem
}

// Error joins the server's problems with "; ".
func (e ServerError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return strings.Join(msgs, "; ")
}
