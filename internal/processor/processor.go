// Package processor asks external processors about tool calls: an HTTP
// service the operator runs (a Presidio or NeMo Guardrails wrapper, a
// house filter) gets a JSON description of a call before it is forwarded
// (phase "request": its arguments) or of its result before the caller
// gets it (phase "response"), and answers pass, deny (with a reason) or
// mutate (new arguments or a new result). Processors run in order (List);
// each request is bounded in time (waiting for one of the processor's
// concurrency slots included) and its answer in size and depth, and is
// decoded strictly: a mutated result must still be a valid
// CallToolResult, mutated arguments a JSON object. A processor that cannot
// answer — unreachable, slow, non-2xx, a malformed answer — gets the
// call its on_error answer: denied unless configured to allow.
//
// Neither the request nor the answer is ever logged or put in an error:
// an error names the status, the bound or the transport failure, and a
// transport error is stripped of the URL (which may carry credentials).
package processor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Bounds and defaults of one processor.
const (
	// DefaultTimeout bounds one request (timeout_ms; config bounds it).
	DefaultTimeout = 2 * time.Second
	// DefaultMaxBody bounds an answer's body (max_body_bytes).
	DefaultMaxBody = 1 << 20
	// DefaultMaxConcurrent is how many requests one processor gets at once.
	DefaultMaxConcurrent = 32
	// MaxReason bounds a deny's reason, as a tool error or record shows it.
	MaxReason = 256
	// MaxDepth bounds the nesting of an answer's JSON.
	MaxDepth = 128
)

// The phases of a call a processor sees.
const (
	Request  = "request"  // before the call is forwarded: its arguments
	Response = "response" // before its result reaches the caller
)

// Actions: what a processor answered, and (Failed…) what on_error made of
// a processor that could not answer. Decision.Action and the metrics name
// them.
const (
	Pass         = "pass"
	Deny         = "deny"
	Mutate       = "mutate"
	ErrorAllowed = "error_allowed" // no answer; on_error allowed the call
	ErrorDenied  = "error_denied"  // no answer; on_error denied it
	Cancelled    = "cancelled"     // the call's context ended first; not counted
)

// Options configure a Client.
type Options struct {
	// Name names the processor in denials, records, spans and metrics.
	Name string
	// URL is where the requests are POSTed; never logged.
	URL string
	// Timeout bounds one request, waiting for a slot included; 0 is
	// DefaultTimeout.
	Timeout time.Duration
	// MaxBody bounds an answer's body; 0 is DefaultMaxBody.
	MaxBody int64
	// MaxConcurrent bounds the requests in flight; 0 is DefaultMaxConcurrent.
	MaxConcurrent int
	// FailOpen allows a call the processor could not answer about; false
	// denies it.
	FailOpen bool
	// Transport sends the requests; nil: a transport of the Client's own.
	Transport http.RoundTripper
	// Metrics counts decisions and times requests; nil: none.
	Metrics *Metrics
}

// Client asks one processor. Safe for concurrent use.
type Client struct {
	o     Options
	hc    *http.Client
	slots chan struct{}
}

// New returns a Client for o.
func New(o Options) *Client {
	o = o.withDefaults()
	rt := o.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = o.MaxConcurrent
		rt = t
	}
	return &Client{o: o, slots: make(chan struct{}, o.MaxConcurrent), hc: &http.Client{Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect is an answer that is not 2xx
		}}}
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
	}
	return o
}

// Same reports whether c was made with the settings of o (name, URL,
// bounds, on_error), so that a reload that keeps them keeps c, its
// connections and its slots.
func (c *Client) Same(o Options) bool {
	o = o.withDefaults()
	return c != nil && c.o.Name == o.Name && c.o.URL == o.URL && c.o.Timeout == o.Timeout && c.o.MaxBody == o.MaxBody &&
		c.o.MaxConcurrent == o.MaxConcurrent && c.o.FailOpen == o.FailOpen
}

// Name is the processor's configured name.
func (c *Client) Name() string { return c.o.Name }

// Close closes the Client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Call is what the mux tells a processor about one call (the wire
// contract's request; docs/processors.md).
type Call struct {
	Phase  string `json:"phase"`
	Method string `json:"method"`
	// Caller is the caller's keyed hash (secret.IDHash), never the id.
	Caller string `json:"caller"`
	Server string `json:"server"`
	// Tool is the tool's name at its server.
	Tool string `json:"tool"`
	// Arguments are the call's arguments (phase request, and response).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Result is the upstream's CallToolResult (phase response).
	Result json.RawMessage `json:"result,omitempty"`
	// RequestID is sent as X-Request-ID; "" for none.
	RequestID string `json:"-"`
}

// Decision is one processor's answer about one call.
type Decision struct {
	// Action is Pass, Deny, Mutate, ErrorAllowed, ErrorDenied or Cancelled.
	Action string
	// Reason is a deny's reason, control characters removed and at most
	// MaxReason bytes; for ErrorDenied and ErrorAllowed, what went wrong.
	Reason string
	// Payload is a mutate's new arguments (phase request) or result
	// (phase response).
	Payload json.RawMessage
	// Err is why the processor did not answer (Error…, Cancelled); it
	// names no part of the request or the answer.
	Err error
	// Latency is how long the request took, waiting for a slot included.
	Latency time.Duration
}

// Process asks the processor about call, within the timeout.
func (c *Client) Process(ctx context.Context, call *Call) Decision {
	start := time.Now()
	a, err := c.ask(ctx, call)
	d := Decision{Action: a.Action, Reason: a.Reason, Latency: time.Since(start)}
	switch {
	case err != nil && ctx.Err() != nil:
		d = Decision{Action: Cancelled, Err: context.Cause(ctx), Latency: d.Latency}
	case err != nil:
		d.Action, d.Err, d.Reason = ErrorDenied, err, err.Error()
		if c.o.FailOpen {
			d.Action = ErrorAllowed
		}
	default:
		d.Payload = a.payload(call.Phase)
	}
	if m := c.o.Metrics; m != nil && d.Action != Cancelled {
		m.decisions.WithLabelValues(c.o.Name, call.Phase, d.Action).Inc()
		m.latency.WithLabelValues(c.o.Name, call.Phase).Observe(d.Latency.Seconds())
	}
	return d
}

// ask sends call, once a slot is free, and decodes the answer.
func (c *Client) ask(ctx context.Context, call *Call) (Answer, error) {
	body, err := json.Marshal(call)
	if err != nil {
		return Answer{}, fmt.Errorf("encoding the request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	select {
	case c.slots <- struct{}{}:
		defer func() { <-c.slots }()
	case <-ctx.Done():
		return Answer{}, c.late(ctx, "no free slot")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.o.URL, bytes.NewReader(body))
	if err != nil {
		return Answer{}, errors.New("the processor URL is not a valid request URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if call.RequestID != "" {
		req.Header.Set("X-Request-ID", call.RequestID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return Answer{}, c.late(ctx, "no answer")
		}
		// Not err's text: it names the processor's host and address,
		// which the caller's tool error must not.
		return Answer{}, errors.New("could not be reached")
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // the connection stays reusable
		return Answer{}, fmt.Errorf("answered status %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.o.MaxBody+1))
	switch {
	case err != nil && ctx.Err() != nil:
		return Answer{}, c.late(ctx, "no whole answer")
	case err != nil:
		return Answer{}, errors.New("the answer broke off")
	case int64(len(data)) > c.o.MaxBody:
		return Answer{}, fmt.Errorf("answered more than %d bytes", c.o.MaxBody)
	}
	return DecodeAnswer(data, call.Phase)
}

// late is the error of a request whose time ran out (what was missing),
// or of one whose call's context ended.
func (c *Client) late(ctx context.Context, what string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s within %v", what, c.o.Timeout)
	}
	return ctx.Err()
}

// Metrics are the processors' decision counters and request latencies,
// shared by every Client of a process (across reloads).
type Metrics struct {
	decisions *prometheus.CounterVec
	latency   *prometheus.HistogramVec
}

// NewMetrics returns the metrics; register Collectors once.
func NewMetrics() *Metrics {
	return &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcp_mux_processor_decisions_total",
			Help: "Calls an external processor decided, by processor, phase (request, response) and action (pass, deny, mutate; error_allowed and error_denied: it did not answer and on_error decided)."},
			[]string{"processor", "phase", "action"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mcp_mux_processor_request_duration_seconds",
			Help:    "Time an external processor took to answer about a call, answered or not (waiting for a free slot included).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9)}, // 0.5 ms … ~33 s
			[]string{"processor", "phase"}),
	}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.decisions, m.latency}
}

// Decisions is the counter of one series of
// mcp_mux_processor_decisions_total.
func (m *Metrics) Decisions(processor, phase, action string) prometheus.Counter {
	return m.decisions.WithLabelValues(processor, phase, action)
}
