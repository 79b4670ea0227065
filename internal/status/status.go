// Package status holds the snapshot of a running mux: each configured
// server's state and counts, the totals and the recent reloads. proxy fills
// it; the status page (api), /readyz and the command line read it. It
// imports nothing of mcp-mux, so readers need not import proxy.
package status

import (
	"fmt"
	"sort"
	"time"
	"unicode/utf8"
)

// Server states in a Snapshot. Starting, Up and Retrying are the states
// package upstream reports for a running server.
const (
	// Starting: the first discovery has not finished yet.
	Starting = "starting"
	// Up: the last discovery succeeded.
	Up = "up"
	// Retrying: the last discovery failed; discovery retries with backoff.
	Retrying = "retrying"
	// Invalid: the server's config entry is invalid and was skipped.
	Invalid = "invalid"
	// Skipped: the entry is valid but the server could not be set up (its
	// credentials or transport settings were refused).
	Skipped = "skipped"
	// Disabled: "enabled": false.
	Disabled = "disabled"
)

// Reload outcomes (the outcome label of mcp_mux_reloads_total).
const (
	// ReloadApplied: the new config is running.
	ReloadApplied = "applied"
	// ReloadPartial: the new config is running, except for the servers named
	// in the problems, which kept their running settings.
	ReloadPartial = "partial"
	// ReloadRejected: the new config failed to load or validate; the last
	// good config keeps serving.
	ReloadRejected = "rejected"
)

// Server is one configured server as the running mux sees it. Its JSON
// (snake_case) is a server in /api/status and in /readyz's detail.
type Server struct {
	Name string `json:"name"`
	// Transport is stdio, http or sse ("" for an invalid entry).
	Transport string `json:"transport,omitempty"`
	// State is Starting, Up or Retrying for a server that runs, else
	// Invalid, Skipped or Disabled.
	State string `json:"state"`
	// Reason says why the server is not up: the last discovery error (with
	// the last stderr lines of a stdio server) or the config problems. It
	// names servers, fields and causes, never a configured secret.
	Reason string `json:"reason,omitempty"`
	// Cause is Reason's most specific part when Reason is an error chain: its
	// last part ("connection refused"), and a stdio server's last stderr
	// line; "" otherwise.
	Cause string `json:"cause,omitempty"`
	// Tools counts the tools of this server the catalog lists (after naming,
	// collisions and the guardrails), HiddenTools those the guardrails hide;
	// both are 0 unless the server is Up (see Snapshot.StaleTools).
	Tools       int `json:"tools"`
	HiddenTools int `json:"hidden_tools"`
	Prompts     int `json:"prompts"`
	Resources   int `json:"resources"`
	// UpstreamSessions are the pooled call sessions, StdioProcesses the
	// running stdio server processes.
	UpstreamSessions int `json:"upstream_sessions"`
	StdioProcesses   int `json:"stdio_processes"`
	// Accounts are the numbers of a server where each user connects their
	// own account; nil for any other.
	Accounts *Accounts `json:"accounts,omitempty"`
	// Protocol is the protocol version the server's discovery session
	// negotiated (2026-07-28, 2025-11-25, …); "" before it is known.
	Protocol string `json:"protocol,omitempty"`
	// Eras are the protocol eras the server speaks, newest first
	// ("2026-07-28", "2025-11-25"): a call session runs on its client's
	// where the server speaks both.
	Eras []string `json:"eras,omitempty"`
}

// Accounts are a connected-account server's numbers: never a token, never
// a user id.
type Accounts struct {
	// Connected counts the users with a connected account (from the store).
	Connected int `json:"connected"`
	// The consents, refreshes and failures (by reason) on this replica.
	ConsentsStarted   int64            `json:"consents_started"`
	ConsentsCompleted int64            `json:"consents_completed"`
	ConsentsFailed    int64            `json:"consents_failed"`
	Refreshes         int64            `json:"refreshes"`
	Failures          map[string]int64 `json:"failures,omitempty"`
}

// Snapshot is the state of the running mux at one moment.
type Snapshot struct {
	Version string
	Started time.Time
	// Ready is what /readyz answers; false while draining.
	Ready, Draining bool
	// Servers lists every configured server in config order, then invalid ones.
	Servers []Server
	// Tools is the size of the aggregated catalog: the Up servers' Tools,
	// StaleTools and BuiltinTools.
	Tools int
	// HiddenTools counts the tools the guardrails hide, across servers.
	HiddenTools int
	// StaleTools counts the tools the catalog still lists from the last good
	// discovery of servers that are not Up (retrying).
	StaleTools int
	// BuiltinTools counts mcp-mux's own tools in the catalog (the durable
	// task tools).
	BuiltinTools int
	// Sessions is the number of downstream MCP sessions.
	Sessions int
	// StdioProcesses counts every running stdio server process.
	StdioProcesses int
	// Reloads are the recent reload attempts, oldest first.
	Reloads []ReloadEvent
	// Warnings are the running config's warnings (near-miss keys, skipped
	// interceptors, …) and the catalog's (tools whose overridden
	// annotations contradict each other), bounded by Bound.
	Warnings []string
	// Tracing reports whether spans are exported (telemetry export on):
	// only then do calls have trace ids.
	Tracing bool
	// Profiles are the configured profiles with their tool counts.
	Profiles []Profile
	// Limits are the limits rules with their use on this replica.
	Limits []Limit
	// SlowCalls and FailedCalls are the recent slow and failed requests
	// (tool calls, prompt gets, resource reads), newest first.
	SlowCalls, FailedCalls []Call
	// Approvals are the pending approval requests (the first
	// MaxApprovalsShown, soonest to expire first); PendingApprovals counts
	// them all.
	Approvals        []Approval
	PendingApprovals int
	// ToolChanges are the tool definitions servers changed since they were
	// pinned (pin_tools), waiting for an operator (the first
	// MaxToolChangesShown, oldest first); PendingToolChanges counts them all.
	ToolChanges        []ToolChange
	PendingToolChanges int
}

// MaxToolChangesShown bounds Snapshot.ToolChanges.
const MaxToolChangesShown = 50

// ToolChange is one changed tool definition waiting to be accepted: which
// parts changed, never their text.
type ToolChange struct {
	Server string    `json:"server"`
	Tool   string    `json:"tool"` // the tool's name at its server
	Mode   string    `json:"mode"` // pin_tools: warn or block
	Parts  []string  `json:"parts"`
	Since  time.Time `json:"since"`
	// Held is block mode's: the pinned definition is served (false: the
	// tool is withheld).
	Held bool `json:"held"`
}

// MaxApprovalsShown bounds Snapshot.Approvals.
const MaxApprovalsShown = 50

// Approval is one pending approval request: no argument values beyond
// its redacted preview.
type Approval struct {
	ID      string    `json:"id"`
	Caller  string    `json:"caller,omitempty"` // hashed as spans and audit records show callers
	Server  string    `json:"server"`
	Tool    string    `json:"tool"`
	Rule    string    `json:"rule"`
	Preview string    `json:"arguments_preview"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// Call is one recent request, as its audit record (package audit) has it.
type Call struct {
	Time time.Time `json:"time"`
	// Kind is the method: tools/call, prompts/get or resources/read.
	Kind   string `json:"kind"`
	Server string `json:"server,omitempty"`
	// Target is the tool, prompt or resource URI.
	Target string `json:"target"`
	// Caller is the caller's id as audit records show it (hashed by
	// default); "" when the caller was anonymous (Anonymous) or records
	// show no ids (user_id none).
	Caller string `json:"caller,omitempty"`
	// Anonymous marks a call no authentication identified (inbound.auth
	// mode none: every caller is the same default user, whose hash says
	// nothing).
	Anonymous bool `json:"anonymous,omitempty"`
	// Outcome is ok, tool_error, error or denied; Denial says why a
	// request was denied, ErrorType what kind of error ended it.
	Outcome    string  `json:"outcome"`
	Denial     string  `json:"denial_reason,omitempty"`
	ErrorType  string  `json:"error_type,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	TraceID    string  `json:"trace_id,omitempty"`
	RequestID  string  `json:"request_id,omitempty"`
}

// ReloadEvent is one reload attempt.
type ReloadEvent struct {
	Time time.Time
	// Trigger says what asked for the reload: "file", "signal", "api", …
	Trigger string
	// Outcome is ReloadApplied, ReloadPartial or ReloadRejected.
	Outcome string
	// Problems are the reasons for a partial or rejected reload and the
	// servers skipped as invalid, each safe to show (they name files,
	// servers and fields, never a configured value).
	Problems []string
	// Changes say what the reload changed: servers added, removed,
	// enabled, disabled or changed, and top-level blocks changed (none for
	// a rejected reload).
	Changes []string
	// Warnings are the new config's warnings (near-miss keys, …) and its
	// catalog's when it was swapped in.
	Warnings []string
}

// Bounds of a list of lines in a snapshot (a reload's problems, changes
// and warnings; the snapshot's warnings): at most MaxLines lines of at
// most MaxLineBytes bytes each.
const (
	MaxLines     = 20
	MaxLineBytes = 1000
)

// Bound returns lines within the bounds: each line past MaxLineBytes cut
// (at a rune boundary, "…" appended), and past MaxLines lines the last
// kept one replaced by "… and N more". nil stays nil.
func Bound(lines []string) []string {
	if lines == nil {
		return nil
	}
	n := min(len(lines), MaxLines)
	out := make([]string, n)
	for i := range n {
		out[i] = clipLine(lines[i])
	}
	if len(lines) > MaxLines {
		out[MaxLines-1] = fmt.Sprintf("… and %d more", len(lines)-MaxLines+1)
	}
	return out
}

// clipLine cuts a line to MaxLineBytes.
func clipLine(s string) string {
	if len(s) <= MaxLineBytes {
		return s
	}
	cut := MaxLineBytes - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Profile is one configured profile: how many tools its callers see.
type Profile struct {
	Name  string `json:"name"`
	Tools int    `json:"tools"`
}

// Profiles are the profiles of tool counts by name, in name order.
func Profiles(sizes map[string]int) []Profile {
	out := make([]Profile, 0, len(sizes))
	for name, n := range sizes {
		out = append(out, Profile{Name: name, Tools: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Limit is one limits rule and its use on this replica.
type Limit struct {
	Name  string `json:"name"`
	Scope string `json:"scope"` // tool, server, caller or (caller, tool)
	// Server and Tool narrow the rule (a tool glob); empty: any.
	Server     string  `json:"server,omitempty"`
	Tool       string  `json:"tool,omitempty"`
	Calls      int     `json:"calls,omitempty"`
	PerSeconds float64 `json:"per_seconds,omitempty"`
	InFlight   int     `json:"in_flight,omitempty"`
	// Running counts this replica's calls holding one of the rule's
	// in-flight slots now; Refused its refusals since start, by kind
	// (rate, in_flight, store_unreachable).
	Running int              `json:"running"`
	Refused map[string]int64 `json:"refused"`
}
