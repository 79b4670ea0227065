// Package authzen asks an external policy decision point whether a call
// may run: one OpenID AuthZEN 1.0 Access Evaluation request per call (POST
// of {subject, action, resource, context}, answered {"decision": bool}),
// bounded in time and in the size of the answer, behind a circuit breaker.
// When the endpoint cannot decide — unreachable, slow, an answer that is
// not 200 with a boolean decision, or the breaker open — the call gets
// Options.FailOpen's answer: denied unless configured otherwise.
//
// Neither the request nor the answer is ever logged or put in an error:
// an error names the status, the bound or the transport failure, and a
// transport error is stripped of the URL (which may carry a token).
package authzen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Bounds and breaker settings.
const (
	// MaxResponseBytes bounds an answer's body; a larger one is an error.
	MaxResponseBytes = 64 << 10
	// DefaultTimeout bounds a decision when Options.Timeout is 0.
	DefaultTimeout = time.Second
	// BreakAfter consecutive failures open the circuit: for Cooldown no
	// request is sent and every call gets the FailOpen answer; then one
	// call probes the endpoint, closing the circuit when it answers.
	BreakAfter = 5
	// Cooldown is how long an open circuit stays open.
	Cooldown = 30 * time.Second
)

// Outcomes of a decision, as Decision.Outcome and the metrics name them.
const (
	Allow       = "allow"        // the endpoint allowed the call
	Deny        = "deny"         // the endpoint denied it
	Failed      = "error"        // the endpoint could not decide; FailOpen decided
	CircuitOpen = "circuit_open" // not asked: the circuit is open; FailOpen decided
	Cancelled   = "cancelled"    // the call's context ended first; not counted as a failure
)

// Options configure a Client.
type Options struct {
	// URL is the Access Evaluation endpoint (…/access/v1/evaluation).
	URL string
	// Timeout bounds one decision; 0 is DefaultTimeout.
	Timeout time.Duration
	// FailOpen allows a call the endpoint could not decide; false denies it.
	FailOpen bool
	// Transport sends the requests; nil: a transport of the Client's own.
	Transport http.RoundTripper
	// Metrics counts decisions and times requests; nil: none.
	Metrics *Metrics
	// Now is the clock of the breaker; nil: time.Now.
	Now func() time.Time
}

// Client asks one endpoint. Safe for concurrent use.
type Client struct {
	o  Options
	hc *http.Client

	mu       sync.Mutex
	failures int       // consecutive failures
	openTill time.Time // the circuit is open until then
	probing  bool      // a call is probing a circuit whose cooldown ended
}

// New returns a Client for o.
func New(o Options) *Client {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	rt := o.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		rt = t
	}
	return &Client{o: o, hc: &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a redirect is an answer that is not 200
	}}}
}

// Same reports whether c was made with the settings of o (URL, Timeout,
// FailOpen), so that a reload that keeps them keeps c, its connections
// and its breaker.
func (c *Client) Same(o Options) bool {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return c != nil && c.o.URL == o.URL && c.o.Timeout == o.Timeout && c.o.FailOpen == o.FailOpen
}

// Close closes the Client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Entity is an AuthZEN subject or resource.
type Entity struct {
	Type       string         `json:"type"`
	ID         string         `json:"id"`
	Properties map[string]any `json:"properties,omitempty"`
}

// Action is an AuthZEN action: the MCP method.
type Action struct {
	Name string `json:"name"`
}

// Request is one Access Evaluation request.
type Request struct {
	Subject  Entity         `json:"subject"`
	Action   Action         `json:"action"`
	Resource Entity         `json:"resource"`
	Context  map[string]any `json:"context,omitempty"`
	// RequestID is sent as X-Request-ID; "" for none.
	RequestID string `json:"-"`
}

// Decision is the answer to one call.
type Decision struct {
	// Allow is whether the call may run: the endpoint's decision or, when
	// it could not decide, Options.FailOpen.
	Allow bool
	// Outcome is one of Allow, Deny, Failed, CircuitOpen, Cancelled.
	Outcome string
	// Err is why the endpoint did not decide (Failed, CircuitOpen,
	// Cancelled); it names no part of the request or the answer.
	Err error
	// Latency is how long the request took (0 when none was sent).
	Latency time.Duration
}

// ErrCircuitOpen is the Err of a call decided without asking: the
// endpoint failed BreakAfter times in a row.
var ErrCircuitOpen = errors.New("the AuthZEN endpoint failed repeatedly; not asked until its cooldown ends")

// Decide asks the endpoint about r within the timeout, unless the circuit
// is open.
func (c *Client) Decide(ctx context.Context, r *Request) Decision {
	ok, probe := c.admit()
	if !ok {
		return c.done(Decision{Allow: c.o.FailOpen, Outcome: CircuitOpen, Err: ErrCircuitOpen})
	}
	start := time.Now()
	allow, err := c.ask(ctx, r)
	d := Decision{Allow: allow, Outcome: Deny, Latency: time.Since(start)}
	switch {
	case err != nil && ctx.Err() != nil:
		d = Decision{Outcome: Cancelled, Err: context.Cause(ctx), Latency: d.Latency}
		if probe {
			c.release()
		}
	case err != nil:
		d.Allow, d.Outcome, d.Err = c.o.FailOpen, Failed, err
		c.fail()
	default:
		if allow {
			d.Outcome = Allow
		}
		c.succeed()
	}
	if c.o.Metrics != nil && d.Outcome != Cancelled {
		c.o.Metrics.latency.Observe(d.Latency.Seconds())
	}
	return c.done(d)
}

// done counts d and returns it.
func (c *Client) done(d Decision) Decision {
	if c.o.Metrics != nil {
		c.o.Metrics.decisions.WithLabelValues(d.Outcome).Inc()
	}
	return d
}

// ask sends r and reads the decision.
func (c *Client) ask(ctx context.Context, r *Request) (bool, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return false, fmt.Errorf("encoding the request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.o.URL, bytes.NewReader(body))
	if err != nil {
		return false, errors.New("the AuthZEN URL is not a valid request URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if r.RequestID != "" {
		req.Header.Set("X-Request-ID", r.RequestID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return false, fmt.Errorf("no decision within %v", c.o.Timeout)
		}
		return false, stripURL(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseBytes))
		return false, fmt.Errorf("answered status %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	switch {
	case err != nil && ctx.Err() == context.DeadlineExceeded:
		return false, fmt.Errorf("no decision within %v", c.o.Timeout)
	case err != nil:
		return false, fmt.Errorf("reading the answer: %w", stripURL(err))
	case len(data) > MaxResponseBytes:
		return false, fmt.Errorf("answered more than %d bytes", MaxResponseBytes)
	}
	var ans struct {
		Decision *bool `json:"decision"`
	}
	if err := json.Unmarshal(data, &ans); err != nil || ans.Decision == nil {
		return false, errors.New(`answered without a boolean "decision"`)
	}
	return *ans.Decision, nil
}

// stripURL is a transport error without the URL net/http puts in it.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// admit reports whether a request may be sent: the circuit is closed, or
// its cooldown ended and no other call is probing it (this one probes).
func (c *Client) admit() (ok, probe bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failures < BreakAfter {
		return true, false
	}
	if c.probing || c.o.Now().Before(c.openTill) {
		return false, false
	}
	c.probing = true
	return true, true
}

// succeed closes the circuit.
func (c *Client) succeed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures, c.probing = 0, false
}

// fail counts a failure; the BreakAfter-th in a row (or a failed probe)
// opens the circuit for Cooldown.
func (c *Client) fail() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures++
	c.probing = false
	if c.failures >= BreakAfter {
		c.openTill = c.o.Now().Add(Cooldown)
	}
}

// release ends a probe that did not finish (its call's context ended)
// without deciding the circuit: the next call probes.
func (c *Client) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.probing = false
}

// Open reports whether the circuit is open now.
func (c *Client) Open() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failures >= BreakAfter && c.o.Now().Before(c.openTill)
}

// Metrics are the decisions' counters and the requests' latency, shared
// by every Client of a process (one per runtime, across reloads).
type Metrics struct {
	decisions *prometheus.CounterVec
	latency   prometheus.Histogram
}

// NewMetrics returns the metrics; register Collectors once.
func NewMetrics() *Metrics {
	return &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcp_mux_authzen_decisions_total",
			Help: "Calls decided through policy.authzen, by outcome (allow, deny, error and circuit_open: on_error decided, cancelled)."}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mcp_mux_authzen_request_duration_seconds",
			Help:    "Time an AuthZEN Access Evaluation request took, answered or not.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8)}), // 0.5 ms … ~8 s
	}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.decisions, m.latency}
}
