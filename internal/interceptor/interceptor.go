// Package interceptor holds the tool-call interceptors compiled into
// mcp-mux and the one registry that names them.
//
// A config's mcpInterceptors list picks interceptors by name; they wrap every
// tools/call in list order (the first listed is outermost). DeerFlow's
// entries are Python import paths; those, like any unknown name, are
// reported and skipped. Interceptors see who called which tool and how it
// ended (the caller as the audit records show it), never arguments,
// results' content, headers or secrets.
package interceptor

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/hashicorp/go-hclog"
)

// Call describes one tools/call.
type Call struct {
	User    string
	Thread  string
	Server  string
	Tool    string // visible name
	RawTool string // the server's name for it
}

// Outcome of a call as interceptors see it.
type Outcome string

// Outcomes.
const (
	OK        Outcome = "ok"         // a result without isError
	ToolError Outcome = "tool_error" // a result with isError
	Error     Outcome = "error"      // a protocol error or cancellation
)

// Next continues the call.
type Next func(ctx context.Context) (json.RawMessage, error)

// Interceptor wraps one call; it must call next at most once.
type Interceptor func(ctx context.Context, c *Call, next Next) (json.RawMessage, error)

// Options are what a built-in may use.
type Options struct {
	Logger hclog.Logger
	// User is how a caller id appears in a log line: as the audit records
	// show it (audit.Auditor.Caller: hashed unless telemetry.audit.user_id
	// says plain or none). Nil, or "" for an id: no caller in the line.
	User func(id string) string
}

// builtins is the registry: the only place interceptor names are defined.
// "audit" is the config name of the call log (calllog.go), kept as README
// documents it; it is not package audit's records.
var builtins = map[string]func(Options) Interceptor{
	"audit": newCallLog,
}

// Names lists the compiled-in interceptors.
func Names() []string {
	out := make([]string, 0, len(builtins))
	for n := range builtins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Build returns the interceptors named, in order, and a problem for each
// name that is not compiled in (callers warn and carry on without it).
func Build(names []string, opts Options) ([]Interceptor, []error) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	var out []Interceptor
	var problems []error
	for _, n := range names {
		mk, ok := builtins[n]
		if !ok {
			problems = append(problems, fmt.Errorf("mcpInterceptors: %q is not a compiled-in interceptor (available: %v); skipping it", n, Names()))
			continue
		}
		out = append(out, mk(opts))
	}
	return out, problems
}

// Chain runs call through the interceptors, first outermost.
func Chain(ctx context.Context, ics []Interceptor, c *Call, call Next) (json.RawMessage, error) {
	next := call
	for i := len(ics) - 1; i >= 0; i-- {
		ic, inner := ics[i], next
		next = func(ctx context.Context) (json.RawMessage, error) { return ic(ctx, c, inner) }
	}
	return next(ctx)
}

// OutcomeOf classifies a call's result.
func OutcomeOf(res json.RawMessage, err error) Outcome {
	if err != nil {
		return Error
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	_ = json.Unmarshal(res, &r)
	if r.IsError {
		return ToolError
	}
	return OK
}
