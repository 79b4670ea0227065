package config

import (
	"fmt"
	"net/url"
	"path"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// The phases a processor may be asked in ("phase").
const (
	PhaseRequest  = "request"
	PhaseResponse = "response"
	PhaseBoth     = "both"
)

// Bounds and defaults of a processors list (package processor has the
// same defaults for a Client made without them).
const (
	// DefaultProcessorTimeout and MaxProcessorTimeout bound one request
	// (timeout_ms).
	DefaultProcessorTimeout = 2 * time.Second
	MaxProcessorTimeout     = 30 * time.Second
	// DefaultProcessorMaxBody and MaxProcessorMaxBody bound an answer
	// (max_body_bytes).
	DefaultProcessorMaxBody = 1 << 20
	MaxProcessorMaxBody     = 16 << 20
	// DefaultProcessorConcurrent is max_concurrent's default.
	DefaultProcessorConcurrent = 32
	// MaxProcessors bounds one processors list (the top level's, a
	// server's): each is a request on every call it applies to.
	MaxProcessors = 16
	// MaxProcessorTools bounds a processor's tools globs.
	MaxProcessorTools = 64
	// MaxProcessorConcurrent bounds a processor's max_concurrent.
	MaxProcessorConcurrent = 1024
)

// Processor is one entry of a "processors" list (top level, or a
// server's, which runs after the top level's): an external HTTP service
// asked about each tools/call it applies to before the call is forwarded
// (phase request) and/or before its result reaches the caller (phase
// response) (docs/processors.md). Reloadable.
type Processor struct {
	// Name names it in denials, audit records, spans and metrics; unique
	// within its list.
	Name string
	// URL is the http or https endpoint the calls are POSTed to (no
	// user:password part); never echoed.
	URL secret.Value
	// Methods are the methods it is asked about; only tools/call.
	Methods []string
	// Tools are globs (path.Match) on the tool's visible name; none: every tool.
	Tools []string
	// Phase is PhaseRequest, PhaseResponse or PhaseBoth.
	Phase string
	// Timeout bounds one request, waiting for a slot included.
	Timeout time.Duration
	// FailOpen lets a call through when it cannot answer ("on_error":
	// "allow"); the default denies the call.
	FailOpen bool
	// MaxBodyBytes bounds its answer.
	MaxBodyBytes int64
	// MaxConcurrent bounds its requests in flight from one mux.
	MaxConcurrent int
}

// Request reports whether p is asked before calls are forwarded.
func (p *Processor) Request() bool { return p.Phase != PhaseResponse }

// Response reports whether p is asked about results.
func (p *Processor) Response() bool { return p.Phase != PhaseRequest }

// parseProcessors reads a processors list n at path: names unique, at
// most MaxProcessors.
func parseProcessors(n *rawdoc.Node, path string, f *findings) []Processor {
	return parseNamedList(n, path, f, "processor", MaxProcessors, func(o *object) (Processor, string, bool) {
		p, ok := parseProcessor(o)
		return p, p.Name, ok
	})
}

// parseProcessor reads one processor; ok is false when it has a problem.
func parseProcessor(o *object) (p Processor, ok bool) {
	before := len(o.f.problems)
	p.Name = o.str("name", "")
	if p.Name == "" {
		o.f.problem(o.field("name"), "is required (it names the processor in denials, audit records and metrics)")
	} else if !isLimitName(p.Name) {
		o.f.problem(o.field("name"), "must be 1..64 letters, digits, '-', '_' or '.'")
	}
	p.URL = o.secret("url")
	if p.URL.IsZero() {
		o.f.problem(o.field("url"), "is required: the processor's http or https endpoint")
	} else if u, err := url.Parse(p.URL.Reveal()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		o.f.problem(o.field("url"), "must be an absolute http or https URL with no credentials or fragment")
	}
	p.Methods = o.strList("methods")
	if p.Methods != nil && len(p.Methods) == 0 {
		o.f.problem(o.field("methods"), "is empty; leave it out for tools/call")
	}
	for i, m := range p.Methods {
		if m != "tools/call" {
			o.f.problem(fmt.Sprintf("%s[%d]", o.field("methods"), i), "must be \"tools/call\": processors see tool calls only")
		}
	}
	if len(p.Methods) == 0 {
		p.Methods = []string{"tools/call"}
	}
	p.Tools = o.strList("tools")
	if len(p.Tools) > MaxProcessorTools {
		o.f.problem(o.field("tools"), "has %d globs; at most %d", len(p.Tools), MaxProcessorTools)
	}
	for i, g := range p.Tools {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			o.f.problem(fmt.Sprintf("%s[%d]", o.field("tools"), i), "is not a valid glob")
		}
	}
	if !o.has("phase") {
		o.f.problem(o.field("phase"), "is required: one of %s", quoteList([]string{PhaseRequest, PhaseResponse, PhaseBoth}))
	}
	p.Phase = o.oneOf("phase", PhaseBoth, PhaseRequest, PhaseResponse, PhaseBoth)
	ms := o.intInRange("timeout_ms", int(DefaultProcessorTimeout/time.Millisecond), 10, int(MaxProcessorTimeout/time.Millisecond))
	p.Timeout = time.Duration(ms) * time.Millisecond
	p.FailOpen = o.oneOf("on_error", PolicyDeny, PolicyDeny, PolicyAllow) == PolicyAllow
	p.MaxBodyBytes = int64(o.intInRange("max_body_bytes", DefaultProcessorMaxBody, 1024, MaxProcessorMaxBody))
	p.MaxConcurrent = o.intInRange("max_concurrent", DefaultProcessorConcurrent, 1, MaxProcessorConcurrent)
	return p, len(o.f.problems) == before
}
