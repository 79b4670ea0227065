package processor

import (
	"context"
	"encoding/json"
	"path"
	"time"
)

// Step is one processor of a List and the calls it is asked about.
type Step struct {
	Client *Client
	// Tools are path.Match globs on the tool's visible name; none: every
	// tool.
	Tools []string
	// Request and Response are the phases it is asked in.
	Request, Response bool
}

// applies reports whether s is asked about tool in phase.
func (s *Step) applies(phase, tool string) bool {
	if phase == Request && !s.Request || phase == Response && !s.Response {
		return false
	}
	if len(s.Tools) == 0 {
		return true
	}
	for _, g := range s.Tools {
		if ok, _ := path.Match(g, tool); ok {
			return true
		}
	}
	return false
}

// List is an ordered list of processors: each sees what the one before
// it let through (its mutation included); the first deny ends the run.
type List []Step

// Has reports whether a processor of l is asked about tool in phase.
func (l List) Has(phase, tool string) bool {
	for i := range l {
		if l[i].applies(phase, tool) {
			return true
		}
	}
	return false
}

// Note is what one processor did about a call, for its span and record.
type Note struct {
	Name, Phase, Action string
	Latency             time.Duration
}

// Outcome is what a List made of one call in one phase.
type Outcome struct {
	// Notes are the processors asked, in order.
	Notes []Note
	// DeniedBy names the processor that denied the call ("": none); Reason
	// is why (its cleaned reason, or what went wrong when it did not
	// answer and on_error denied).
	DeniedBy, Reason string
	// Failed marks a denial by on_error: the processor did not answer.
	Failed bool
	// Payload is the call's arguments (phase request) or result (phase
	// response) after every mutation; Mutated says whether one changed it.
	Payload json.RawMessage
	Mutated bool
	// Err is the call's context's end, when it ended first.
	Err error
}

// Run asks l's processors that apply to tool about call in call.Phase,
// in order; call.Arguments (request) or call.Result (response) is what
// the first one sees.
func (l List) Run(ctx context.Context, tool string, call Call) Outcome {
	var out Outcome
	payload := &call.Arguments
	if call.Phase == Response {
		payload = &call.Result
	}
	out.Payload = *payload
	for i := range l {
		st := &l[i]
		if !st.applies(call.Phase, tool) {
			continue
		}
		d := st.Client.Process(ctx, &call)
		out.Notes = append(out.Notes, Note{Name: st.Client.Name(), Phase: call.Phase, Action: d.Action, Latency: d.Latency})
		switch d.Action {
		case Cancelled:
			out.Err = d.Err
			return out
		case Deny, ErrorDenied:
			out.DeniedBy, out.Reason, out.Failed = st.Client.Name(), d.Reason, d.Action == ErrorDenied
			return out
		case Mutate:
			*payload, out.Payload, out.Mutated = d.Payload, d.Payload, true
		}
	}
	return out
}
