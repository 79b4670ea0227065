package admission

import (
	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Caller-chosen values in a message.
//
// Every /mcp POST body passes CheckValues before any decoder, handler,
// metric, span or record sees it: the values a caller picks that mcp-mux
// keeps, counts or forwards by name — the id, the tool or prompt name, a
// resource URI, a cursor, a completion's reference, a progress token, a
// cancelled request's id — must be within their bounds (package bounds),
// else the whole message is refused (400, -32600) with an error that names
// the field. Member names are matched as lenient decoders match them
// (wire.FoldName: case and Unicode folding, escapes decoded, every
// duplicate), so no spelling of "id" slips past.

// CheckValues checks the caller-chosen values of one message or, for a
// batch, of each message.
func CheckValues(body []byte, sh wire.Shape) *bounds.Error {
	if !sh.Batch {
		return checkMessage(body)
	}
	for _, m := range wire.Elements(body) {
		if err := checkMessage(m); err != nil {
			return err
		}
	}
	return nil
}

// checkMessage checks one message's id and params.
func checkMessage(m []byte) *bounds.Error {
	var err *bounds.Error
	wire.MemberValues(m, func(name string, v []byte) bool {
		switch {
		case wire.FoldIs(name, "ID"):
			err = raw("id", v, bounds.ID)
		case wire.FoldIs(name, "PARAMS"):
			err = checkParams(v)
		}
		return err == nil
	})
	return err
}

// checkParams checks the members of a request's or notification's params.
func checkParams(p []byte) *bounds.Error {
	var err *bounds.Error
	wire.MemberValues(p, func(name string, v []byte) bool {
		switch {
		case wire.FoldIs(name, "NAME"):
			err = str("params.name", v, bounds.Name)
		case wire.FoldIs(name, "URI"):
			err = str("params.uri", v, bounds.URI)
		case wire.FoldIs(name, "CURSOR"):
			err = str("params.cursor", v, bounds.Cursor)
		case wire.FoldIs(name, "REQUESTID"):
			err = raw("params.requestId", v, bounds.ID)
		case wire.FoldIs(name, "PROGRESSTOKEN"):
			err = raw("params.progressToken", v, bounds.ProgressToken)
		case wire.FoldIs(name, "REF"):
			err = checkRef(v)
		case wire.FoldIs(name, "META"):
			err = checkMeta(v)
		}
		return err == nil
	})
	return err
}

// checkRef checks a completion's params.ref.
func checkRef(v []byte) *bounds.Error {
	var err *bounds.Error
	wire.MemberValues(v, func(name string, v []byte) bool {
		switch {
		case wire.FoldIs(name, "NAME"):
			err = str("params.ref.name", v, bounds.Name)
		case wire.FoldIs(name, "URI"):
			err = str("params.ref.uri", v, bounds.URI)
		}
		return err == nil
	})
	return err
}

// checkMeta checks params._meta's progress token.
func checkMeta(v []byte) *bounds.Error {
	var err *bounds.Error
	wire.MemberValues(v, func(name string, v []byte) bool {
		if wire.FoldIs(name, "PROGRESSTOKEN") {
			err = raw("params._meta.progressToken", v, bounds.ProgressToken)
		}
		return err == nil
	})
	return err
}

// raw checks a value's JSON text against max bytes.
func raw(field string, v []byte, max int) *bounds.Error {
	if len(v) > max {
		return &bounds.Error{Field: field, Len: len(v), Max: max}
	}
	return nil
}

// str checks a string value's length against max bytes; a value of
// another type is the decoder's to refuse.
func str(field string, v []byte, max int) *bounds.Error {
	if n := wire.StringLen(v); n > max {
		return &bounds.Error{Field: field, Len: n, Max: max}
	}
	return nil
}
