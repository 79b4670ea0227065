package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Bounds of the arguments an expression reads. They are converted once
// per call, when an expression first reads args; past a bound the
// conversion fails with ErrArgs and so does every expression that reads
// them (the decision fails closed).
const (
	// MaxArgsBytes bounds the arguments' JSON text.
	MaxArgsBytes = 1 << 20
	// MaxArgsDepth bounds the nesting of their arrays and objects.
	MaxArgsDepth = 64
	// MaxArgsValues bounds how many values (members and items, nested
	// ones included) they hold.
	MaxArgsValues = 100_000
)

// Vars are what a condition sees of one call. Fill the exported fields;
// the rest caches what the expressions of one call share.
type Vars struct {
	Caller Caller
	// Method is the call's MCP method: "tools/call", "prompts/get" or
	// "resources/read".
	Method string
	// Server is the configured name of the server the call goes to.
	Server string
	// Tool is the tool's visible name (the prompt's for prompts/get, the
	// URI for resources/read).
	Tool string
	// Args are the call's arguments as JSON (a tool's with its fixed
	// arguments applied; a prompt's as an object of strings); empty or
	// null is {}.
	Args json.RawMessage
	// Annotations are the tool's effective annotations (after overrides,
	// MCP's defaults where the tool sets none); nil for a prompt or
	// resource, whose annotations expressions see as {}.
	Annotations *Annotations

	caller, annots, args ref.Val
	argsErr              error
}

// Caller is who makes the call.
type Caller struct {
	// User is the authenticated user: "default" when inbound.auth is none
	// or named nobody.
	User string
	// Profile is the profile the call is served under ("" for none).
	Profile string
}

// Annotations are a tool's annotations as a condition sees them, under
// their MCP names (annotations.destructiveHint, …).
type Annotations struct {
	Title                                                        string
	ReadOnlyHint, DestructiveHint, IdempotentHint, OpenWorldHint bool
}

// DefaultAnnotations are MCP's defaults for a tool that sets no hints: not
// read-only, destructive, not idempotent, open-world.
func DefaultAnnotations() Annotations {
	return Annotations{DestructiveHint: true, OpenWorldHint: true}
}

// activation is Vars as cel-go resolves names in it: each variable
// converted on first use and kept for the call's next expressions.
type activation Vars

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "caller":
		if a.caller == nil {
			a.caller = types.NewStringStringMap(types.DefaultTypeAdapter, map[string]string{"user": a.Caller.User, "profile": a.Caller.Profile})
		}
		return a.caller, true
	case "method":
		return types.String(a.Method), true
	case "server":
		return types.String(a.Server), true
	case "tool":
		return types.String(a.Tool), true
	case "args":
		return a.argsVal(), true
	case "annotations":
		if a.annots == nil {
			a.annots = a.Annotations.val()
		}
		return a.annots, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

// argsVal is the call's arguments as a CEL value, converted once; past a
// bound, an error value every expression reading them fails with.
func (a *activation) argsVal() ref.Val {
	if a.args == nil {
		a.args, a.argsErr = argsValue(a.Args)
		if a.argsErr != nil {
			a.args = types.WrapErr(a.argsErr)
		}
	}
	return a.args
}

// val is a as a CEL map: empty for nil.
func (a *Annotations) val() ref.Val {
	m := map[string]any{}
	if a != nil {
		m = map[string]any{"title": a.Title, "readOnlyHint": a.ReadOnlyHint, "destructiveHint": a.DestructiveHint,
			"idempotentHint": a.IdempotentHint, "openWorldHint": a.OpenWorldHint}
	}
	return types.NewStringInterfaceMap(types.DefaultTypeAdapter, m)
}

// ArgsError is arguments past a bound of what an expression may read. It
// names the bound, never a value.
type ArgsError struct {
	What string // "bytes", "levels of nesting", "values", "JSON that does not parse", "a repeated member name"
	Max  int    // the bound; 0 for JSON that does not parse
}

func (e *ArgsError) Error() string {
	if e.Max == 0 {
		return fmt.Sprintf("%v: %s", ErrArgs, e.What)
	}
	return fmt.Sprintf("%v: more than %d %s", ErrArgs, e.Max, e.What)
}

func (e *ArgsError) Unwrap() error { return ErrArgs }

// argsValue converts a call's JSON arguments to the CEL value an
// expression reads as args, within MaxArgsBytes, MaxArgsDepth and
// MaxArgsValues: objects are maps with string keys (a repeated member name
// is an error), arrays are lists, numbers are int when they are integers
// written without a fraction or exponent that fit in 64 bits and double
// otherwise, null is null. Empty or null arguments are {}.
func argsValue(raw json.RawMessage) (ref.Val, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return types.NewStringInterfaceMap(types.DefaultTypeAdapter, map[string]any{}), nil
	}
	if len(t) > MaxArgsBytes {
		return nil, &ArgsError{What: "bytes", Max: MaxArgsBytes}
	}
	if err := checkShape(t); err != nil {
		return nil, err
	}
	if err := wire.CheckNames(t); err != nil {
		if errors.As(err, new(*wire.DuplicateNameError)) {
			return nil, &ArgsError{What: "a repeated member name"}
		}
		return nil, &ArgsError{What: "JSON that does not parse"}
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &ArgsError{What: "JSON that does not parse"}
	}
	return celValue(v), nil
}

// checkShape refuses JSON nested deeper than MaxArgsDepth or holding more
// than MaxArgsValues values, before anything decodes it: one pass, strings
// skipped.
func checkShape(data []byte) error {
	depth, values := 0, 1
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			if depth++; depth > MaxArgsDepth {
				return &ArgsError{What: "levels of nesting", Max: MaxArgsDepth}
			}
		case '}', ']':
			depth--
		case ',':
			if values++; values > MaxArgsValues {
				return &ArgsError{What: "values", Max: MaxArgsValues}
			}
		}
	}
	return nil
}

// celValue is a decoded JSON value (UseNumber) as a CEL value.
func celValue(v any) ref.Val {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]ref.Val, len(t))
		for k, e := range t {
			m[k] = celValue(e)
		}
		return types.NewMap(types.DefaultTypeAdapter, m)
	case []any:
		items := make([]ref.Val, len(t))
		for i, e := range t {
			items[i] = celValue(e)
		}
		return types.NewRefValList(types.DefaultTypeAdapter, items)
	case string:
		return types.String(t)
	case json.Number:
		return number(t)
	case bool:
		return types.Bool(t)
	}
	return types.NullValue
}

// number is a JSON number as CEL has it: an int when written as an
// integer that fits, else a double.
func number(n json.Number) ref.Val {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return types.Int(i)
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return types.Double(0) // json.Decoder checked the syntax
	}
	return types.Double(f)
}
