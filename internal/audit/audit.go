// Package audit records what callers did through mcp-mux: one structured
// JSON record per tools/call, prompts/get and resources/read (who, which
// server and tool, prompt or resource, how it ended, how long it took,
// how many bytes went each way, and why a call was denied), written off
// the request path to stderr or a file, at a configured level of detail.
//
// A record never holds a secret, a result or a header. Arguments appear
// only at DetailFull, only for a server whose config opts in
// ("telemetry": {"arguments": true}), and only as secret.RedactJSON leaves
// them. Caller ids are hashed (a keyed secret.IDHash, the spans' own)
// unless configured plain, in a denial reason too. Every value a caller
// chooses is clipped to its bound in internal/bounds, so a record is at
// most MaxRecordBytes, and the queue of records waiting for the output is
// bounded in records and in bytes: past either, records are dropped and
// counted, so an output nobody reads costs a bounded amount of memory.
//
// The Auditor also keeps the recent slow and failed calls, with their
// trace ids, for the status page, whether or not records are written.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Kinds of request a record describes.
const (
	ToolCall     = "tools/call"
	PromptGet    = "prompts/get"
	ResourceRead = "resources/read"
)

// Outcomes of a request.
const (
	OK        = "ok"         // a result (for a tool, without isError)
	ToolError = "tool_error" // a tool result with isError
	Error     = "error"      // a JSON-RPC error, a failure or a cancellation
	Denied    = "denied"     // refused by mcp-mux's policy (DenialReason says why)
)

// Detail levels of the records.
const (
	// DetailMinimal: time, kind, caller, server, target, outcome, duration.
	DetailMinimal = "minimal"
	// DetailStandard (the default) adds the request and trace ids, thread,
	// session, protocol, raw tool name, bytes in and out, denial reason and
	// error type.
	DetailStandard = "standard"
	// DetailFull adds the arguments of calls to servers that opt in, redacted.
	DetailFull = "full"
)

// MaxArgumentBytes bounds a record's redacted arguments; larger ones are
// left out (ArgumentsOmitted says so).
const MaxArgumentBytes = 8 << 10

// MaxRecordBytes bounds one record as written, its JSON line: each string
// of a record is clipped to its bound in internal/bounds (a tool or prompt
// name to bounds.Name, a URI to bounds.URI, a thread, session, request id,
// caller and denial reason to theirs, with the full length noted) and the
// arguments to MaxArgumentBytes, so whatever a caller sends (escaped
// control characters included) a record fits.
const MaxRecordBytes = 80 << 10

// Record is one audited request.
type Record struct {
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"`
	RequestID string    `json:"request_id,omitempty"`
	TraceID   string    `json:"trace_id,omitempty"`
	Caller    string    `json:"caller,omitempty"`
	Thread    string    `json:"thread,omitempty"`
	Session   string    `json:"session,omitempty"`
	Protocol  string    `json:"protocol,omitempty"`
	Server    string    `json:"server,omitempty"`
	Tool      string    `json:"tool,omitempty"`
	RawTool   string    `json:"raw_tool,omitempty"`
	Prompt    string    `json:"prompt,omitempty"`
	URI       string    `json:"uri,omitempty"`
	Outcome   string    `json:"outcome"`
	Denial    string    `json:"denial_reason,omitempty"`
	// PolicyRule and PolicyEffect are policy.rules' decision: the rule that
	// decided ("" when none matched) and its effect, allow or deny; absent
	// when no rule applies to the call's method.
	PolicyRule   string `json:"policy_rule,omitempty"`
	PolicyEffect string `json:"policy_effect,omitempty"`
	// AuthZEN is policy.authzen's outcome: allow, deny, error or
	// circuit_open (on_error decided).
	AuthZEN    string  `json:"authzen,omitempty"`
	ErrorType  string  `json:"error_type,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	// BytesIn and BytesOut are the sizes of the arguments (a resource's URI)
	// and of the result; absent when 0.
	BytesIn  int `json:"bytes_in,omitempty"`
	BytesOut int `json:"bytes_out,omitempty"`
	// Arguments are the call's arguments as secret.RedactJSON leaves them.
	Arguments        json.RawMessage `json:"arguments,omitempty"`
	ArgumentsOmitted string          `json:"arguments_omitted,omitempty"`
	// Approval is the approval a call ran under, or (kind "approval") a
	// decision.
	Approval *Approval `json:"approval,omitempty"`
	// Processors are the external processors asked about the call, in
	// order (at most MaxProcessors).
	Processors []Processor `json:"processors,omitempty"`
	// ResultGuard is what the result guards did to a tool's result.
	ResultGuard *ResultGuard `json:"result_guard,omitempty"`
}

// MaxProcessors bounds the processors a record lists: two phases of two
// lists of at most 16 each.
const MaxProcessors = 64

// Processor is what a record says of one external processor's decision:
// its name, the phase (request, response), the action (pass, deny,
// mutate, error_allowed, error_denied, cancelled) and how long it took.
type Processor struct {
	Name   string  `json:"name"`
	Phase  string  `json:"phase"`
	Action string  `json:"action"`
	MS     float64 `json:"ms"`
}

// ResultGuard is what a record says of the result guards: the action on
// a result over its budget (truncated, spilled, refused; "" within it),
// the credentials redacted, the result's size and what was kept, in
// characters.
type ResultGuard struct {
	Action     string `json:"action,omitempty"`
	Redactions int    `json:"redactions,omitempty"`
	Chars      int    `json:"chars"`
	Kept       int    `json:"kept"`
}

// Approval is what a record says of an approval: its id, rule, the
// decision (approve, deny) and who decided (caller, or the operator's
// name).
type Approval struct {
	ID       string `json:"id"`
	Rule     string `json:"rule"`
	Decision string `json:"decision,omitempty"`
	By       string `json:"decided_by,omitempty"`
}

// Options configure New.
type Options struct {
	// Enabled writes records; without it only the recent slow and failed
	// calls are kept.
	Enabled bool
	// Output is "stderr" (default), "stdout" or an absolute file path.
	Output string
	// MaxFileBytes rotates a file output past this size (to Output+".1");
	// default 100 MiB.
	MaxFileBytes int64
	// Detail is DetailMinimal, DetailStandard (default) or DetailFull.
	Detail string
	// UserID is how callers appear: "hashed" (default), "plain" or "none".
	UserID string
	// Slow is the duration from which a call is kept as slow; default 1 s.
	Slow time.Duration
	// Buffer bounds the records waiting to be written; past it records are
	// dropped and counted. Default 4096.
	Buffer int
	// BufferBytes bounds the bytes of the records waiting to be written
	// (and the one being written); past it records are dropped and
	// counted. Default 4 MiB.
	BufferBytes int
	// IDs hashes caller ids; give telemetry.Options the same, so records
	// and spans of a caller match. Nil: a random key of this Auditor's own.
	IDs *secret.IDHash
	Log hclog.Logger
}

// Auditor writes records and keeps the recent slow and failed calls. A
// nil *Auditor does nothing.
type Auditor struct {
	o      Options
	w      *writer // nil when records are off
	mu     sync.Mutex
	slow   ring
	failed ring
}

// New returns the Auditor o asks for; with records on it opens the output
// (a file's directory must exist).
func New(o Options) (*Auditor, error) {
	if o.Detail == "" {
		o.Detail = DetailStandard
	}
	if o.Slow <= 0 {
		o.Slow = time.Second
	}
	if o.Log == nil {
		o.Log = hclog.NewNullLogger()
	}
	if o.IDs == nil {
		o.IDs = secret.NewIDHash("")
	}
	a := &Auditor{o: o, slow: ring{max: recentCalls}, failed: ring{max: recentCalls}}
	if !o.Enabled {
		return a, nil
	}
	w, err := newWriter(o)
	if err != nil {
		return nil, err
	}
	a.w = w
	return a, nil
}

// Register adds the records' counters (mcp_mux_audit_records_total and
// …_dropped_total) to reg.
func (a *Auditor) Register(reg prometheus.Registerer) error {
	if a == nil || a.w == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{a.w.written, a.w.dropped} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("audit: metrics: %w", err)
		}
	}
	return nil
}

// Close flushes the records still buffered and closes the output.
func (a *Auditor) Close() error {
	if a == nil || a.w == nil {
		return nil
	}
	return a.w.close()
}

// Entry is one request being audited: Start it, fill what becomes known,
// Finish it.
type Entry struct {
	Record
	start time.Time
	args  json.RawMessage
	sc    *secret.Scrubber
	full  bool
}

// Start begins the entry of a request of kind.
func (a *Auditor) Start(kind string) Entry {
	if a == nil {
		return Entry{}
	}
	return Entry{Record: Record{Kind: kind}, start: time.Now()}
}

// Deny marks the request denied by policy, for reason.
func (e *Entry) Deny(reason string) { e.Denial = reason }

// Arguments records a call's arguments, to be redacted with sc, when the
// server opted in; they appear only at DetailFull.
func (e *Entry) Arguments(args json.RawMessage, sc *secret.Scrubber) {
	e.args, e.sc, e.full = args, sc, true
}

// Caller is who made a request and on which session. Anonymous marks a
// caller no authentication identified (inbound.auth mode none, User the
// default user): records hash its User as any other, the recent calls of
// the status page show it as anonymous.
type Caller struct {
	User, Thread, Session, Protocol string
	Anonymous                       bool
}

// Finish ends e with the request's result (res, err): the record is
// queued for writing, and kept as recent when slow or failed.
func (a *Auditor) Finish(ctx context.Context, e *Entry, c Caller, res json.RawMessage, err error) {
	if a == nil || e.start.IsZero() {
		return
	}
	d := time.Since(e.start)
	e.Outcome, e.ErrorType = outcomeOf(e, res, err)
	slow, failed := d >= a.o.Slow, e.Outcome != OK
	if a.w == nil && !slow && !failed {
		return // the common case with records off: nothing to build
	}
	e.Time = e.start.UTC()
	e.DurationMS = float64(d.Microseconds()) / 1000
	e.BytesOut = len(res)
	e.RequestID = reqid.From(ctx)
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		e.TraceID = sc.TraceID().String()
	}
	e.Caller, e.Thread, e.Session, e.Protocol = a.user(c.User), c.Thread, c.Session, c.Protocol
	e.Denial = a.hideUser(e.Denial, c.User, e.Caller)
	e.bound()
	if slow || failed {
		a.keep(&e.Record, c.Anonymous, slow, failed)
	}
	if a.w != nil {
		a.w.put(a.shape(e))
	}
}

// Caller is a caller id as the records show it (Options.UserID: hashed
// by default, plain or none, ""), for other logs that name callers (the
// "audit" interceptor's line); a nil Auditor shows none.
func (a *Auditor) Caller(id string) string {
	if a == nil {
		return ""
	}
	return a.user(id)
}

// user is a caller id as configured.
func (a *Auditor) user(id string) string {
	switch {
	case id == "" || a.o.UserID == "none":
		return ""
	case a.o.UserID == "plain":
		return id
	}
	return a.o.IDs.Of(id)
}

// hideUser is a denial reason with the caller's plain id (a credentials
// denial quotes it to the caller) replaced by the caller as the record
// shows it, unless records show ids plain.
func (a *Auditor) hideUser(reason, id, shown string) string {
	if reason == "" || id == "" || a.o.UserID == "plain" {
		return reason
	}
	if shown == "" {
		shown = "(caller)"
	}
	return strings.ReplaceAll(reason, id, shown)
}

// bound redacts r's URI and clips each of r's strings to its bound
// (bounds.Clip notes the full length): those a caller chooses and, so the
// record's bound holds whatever a room passes, those mcp-mux sets.
func (r *Record) bound() {
	r.URI = bounds.Clip(secret.RedactURI(r.URI), bounds.URI)
	r.Tool = bounds.Clip(r.Tool, bounds.Name)
	r.RawTool = bounds.Clip(r.RawTool, bounds.Name)
	r.Prompt = bounds.Clip(r.Prompt, bounds.Name)
	r.Thread = bounds.Clip(r.Thread, bounds.Thread)
	r.Session = bounds.Clip(r.Session, bounds.Session)
	r.RequestID = bounds.Clip(r.RequestID, reqid.MaxLen)
	r.Caller = bounds.Clip(r.Caller, bounds.User)
	r.Denial = bounds.Clip(r.Denial, bounds.Reason)
	r.PolicyRule = bounds.Clip(r.PolicyRule, bounds.Name)
	r.Server = bounds.Clip(r.Server, bounds.Name)
	r.Protocol = bounds.Clip(r.Protocol, bounds.Name)
	r.ErrorType = bounds.Clip(r.ErrorType, bounds.Name)
	if len(r.Processors) > MaxProcessors {
		r.Processors = r.Processors[:MaxProcessors]
	}
	for i := range r.Processors {
		p := &r.Processors[i]
		p.Name, p.Phase, p.Action = bounds.Clip(p.Name, bounds.Name), bounds.Clip(p.Phase, bounds.Name), bounds.Clip(p.Action, bounds.Name)
	}
}

// shape trims e's record to the configured detail and redacts its
// arguments.
func (a *Auditor) shape(e *Entry) Record {
	r := e.Record
	switch a.o.Detail {
	case DetailMinimal:
		return Record{Time: r.Time, Kind: r.Kind, Caller: r.Caller, Server: r.Server, Tool: r.Tool, Prompt: r.Prompt, URI: r.URI,
			Outcome: r.Outcome, DurationMS: r.DurationMS}
	case DetailFull:
		if e.full && len(e.args) > 0 {
			red, err := secret.RedactJSON(e.args, e.sc, MaxArgumentBytes)
			if err != nil {
				r.ArgumentsOmitted = fmt.Sprintf("%d bytes: %v", len(e.args), err)
			} else {
				r.Arguments = red
			}
		}
	}
	return r
}

// outcomeOf classifies a finished request and names its error type: a
// JSON-RPC code, "cancelled", "tool_error" or "error".
func outcomeOf(e *Entry, res json.RawMessage, err error) (string, string) {
	var rpc *jsonrpc.Error
	switch {
	case e.Denial != "":
		return Denied, ""
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return Error, "cancelled"
	case errors.As(err, &rpc):
		return Error, fmt.Sprint(rpc.Code)
	case err != nil:
		return Error, "error"
	case e.Kind == ToolCall && wire.IsToolError(res):
		return ToolError, "tool_error"
	}
	return OK, ""
}
