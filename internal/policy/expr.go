// Package policy evaluates the CEL conditions of mcp-mux's rules over one
// call: who calls (caller.user, caller.profile), which method, server and
// tool, the call's arguments as JSON values and the tool's effective
// annotations. Compile checks an expression once, when the config is
// loaded (it must be a boolean); Expr.Eval runs it per call under a cost
// limit and the call's context. Rules are policy.rules compiled: the first
// whose method, server, tool glob and condition match decides.
//
// Nothing here reads a request or a config file: the call path fills Vars,
// config names the rules. A caller's arguments are converted for an
// expression only when one reads them, within MaxArgsBytes, MaxArgsDepth
// and MaxArgsValues; past a bound, or when an expression fails, a
// decision fails closed.
package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

// Bounds of an expression.
const (
	// MaxExprBytes bounds an expression's source.
	MaxExprBytes = 4 << 10
	// CostLimit bounds one evaluation: CEL's runtime cost, roughly one unit
	// per operation (a comparison, a field selection, one iteration of a
	// comprehension, a string's length over ten for string functions). An
	// evaluation past it stops with ErrCostLimit.
	CostLimit = 100_000
	// interruptEvery is how many comprehension iterations run between
	// checks of the call's context.
	interruptEvery = 100
)

// Errors of an evaluation; Eval wraps them.
var (
	// ErrCostLimit: the evaluation went past CostLimit.
	ErrCostLimit = errors.New("CEL cost limit exceeded")
	// ErrInterrupted: the call's context ended during the evaluation.
	ErrInterrupted = errors.New("CEL evaluation interrupted")
	// ErrArgs: the call's arguments are past a bound of what an expression
	// may read (ArgsError says which).
	ErrArgs = errors.New("arguments cannot be evaluated")
	// ErrRuntime: the expression failed on the values it read (a missing
	// key, a value of another type, an index out of range); the error
	// names the kind of failure, never a value.
	ErrRuntime = errors.New("CEL evaluation error")
)

// Expr is one compiled condition. It is immutable and safe for concurrent
// use.
type Expr struct {
	src string
	prg cel.Program
}

// env is the one CEL environment every expression compiles in: the
// variables of Vars and the standard library with the strings, sets and
// lists extensions and optional values. Built on first use.
var env = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("caller", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("method", cel.StringType),
		cel.Variable("server", cel.StringType),
		cel.Variable("tool", cel.StringType),
		cel.Variable("args", cel.DynType),
		cel.Variable("annotations", cel.MapType(cel.StringType, cel.DynType)),
		cel.OptionalTypes(),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(MaxExprBytes),
		ext.Strings(),
		ext.Sets(),
		ext.Lists(),
	)
})

// Compile parses and checks src as a condition: a CEL expression over the
// variables caller, method, server, tool, args and annotations that
// evaluates to a bool. The error says what is wrong and where (CEL's own
// message, with line and column).
func Compile(src string) (*Expr, error) {
	switch {
	case strings.TrimSpace(src) == "":
		return nil, errors.New("is empty; write a CEL expression that evaluates to true or false")
	case len(src) > MaxExprBytes:
		return nil, fmt.Errorf("is %d bytes; at most %d", len(src), MaxExprBytes)
	case !utf8.ValidString(src):
		return nil, errors.New("is not valid UTF-8")
	}
	e, err := env()
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	ast, iss := e.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("does not compile: %s", strings.TrimSpace(iss.Err().Error()))
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("evaluates to %s, not bool (compare a value: args.flag == true)", cel.FormatCELType(t))
	}
	prg, err := e.Program(ast, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(interruptEvery), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fmt.Errorf("does not compile: %w", err)
	}
	return &Expr{src: src, prg: prg}, nil
}

// Source is the expression as written.
func (x *Expr) Source() string { return x.src }

// Eval evaluates x over v within CostLimit, stopping when ctx ends. An
// error (ErrCostLimit, ErrInterrupted, ErrArgs, ErrRuntime — a missing map
// key, a value of another type) leaves the result false; a decision fails
// closed on it. No error quotes a value the call carried. v caches its converted arguments: evaluate every expression of one
// call with the same *Vars, from one goroutine.
func (x *Expr) Eval(ctx context.Context, v *Vars) (bool, error) {
	out, _, err := x.prg.ContextEval(ctx, (*activation)(v))
	if err != nil {
		return false, evalError(err, v)
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("evaluated to %s, not bool", out.Type().TypeName())
	}
	return b, nil
}

// evalError is err as Eval reports it: the bound or interruption it
// stands for, the arguments' conversion error, or CEL's message.
func evalError(err error, v *Vars) error {
	var cancelled interpreter.EvalCancelledError
	switch {
	case errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded:
		return fmt.Errorf("%w (%d)", ErrCostLimit, CostLimit)
	case errors.As(err, &cancelled), errors.Is(err, interpreter.InterruptError{}):
		return ErrInterrupted
	case errors.Is(err, ErrArgs) && v.argsErr != nil:
		return v.argsErr
	}
	return fmt.Errorf("%w: %s", ErrRuntime, failureKind(err.Error()))
}

// failureKind is what a CEL runtime error says without the values it may
// quote (a map key, a string that is not a timestamp or a regexp, an
// index the caller sent): its message up to the first colon when that is
// plain words ("no such key", "no such overload", "index out of bounds"),
// a conversion error (which names types only) whole, else "evaluation
// error".
func failureKind(msg string) string {
	if strings.HasPrefix(msg, "type conversion error from '") && !strings.ContainsAny(msg, `":`) {
		return msg
	}
	kind, _, _ := strings.Cut(msg, ":")
	if len(kind) == 0 || len(kind) > 40 || strings.ContainsFunc(kind, func(r rune) bool { return r != ' ' && (r < 'a' || r > 'z') }) {
		return "evaluation error"
	}
	return kind
}
