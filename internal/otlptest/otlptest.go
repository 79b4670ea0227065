// Package otlptest is an OTLP receiver for tests: an OTLP/HTTP endpoint
// (Start) or an OTLP/gRPC one (StartGRPC) on a loopback port that decodes
// what exporters send with the official go.opentelemetry.io/proto/otlp types
// and keeps it as flat, easy-to-assert values (Span, Metric).
//
// Over HTTP it takes POST /v1/traces, /v1/metrics and /v1/logs as
// application/x-protobuf or application/json (OTLP/JSON: hex trace and span
// ids), gzip-compressed or not, and answers the empty Export*ServiceResponse
// in the request's encoding. Over gRPC it serves the trace, metrics and logs
// collector services, gzip included. Logs are decoded and counted only.
//
// A test waits for what it expects with WaitSpans or WaitMetric, which
// return as soon as the condition holds. An export the receiver cannot
// decode fails the test when it ends.
package otlptest

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Exporter protocols, as OTEL_EXPORTER_OTLP_PROTOCOL names them.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolJSON = "http/json"
	ProtocolGRPC = "grpc"
)

// Signals: what an export carries.
const (
	Traces  = "traces"
	Metrics = "metrics"
	Logs    = "logs"
)

// Receiver keeps what exporters sent it. Its methods are safe for
// concurrent use.
type Receiver struct {
	endpoint string
	protocol string

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every export
	spans    []Span
	metrics  []Metric
	requests []Request
	errs     []error // exports that could not be decoded
}

// Request is one export the receiver answered.
type Request struct {
	Signal   string      // Traces, Metrics or Logs
	Protocol string      // ProtocolHTTP, ProtocolJSON or ProtocolGRPC
	Encoding string      // "gzip", or "" for none
	Header   http.Header // the HTTP headers, or the gRPC metadata
	Items    int         // spans, metric data points or log records
}

func newReceiver(protocol string) *Receiver {
	return &Receiver{protocol: protocol, changed: make(chan struct{})}
}

// Endpoint is the receiver's base URL, http://127.0.0.1:port, for
// OTEL_EXPORTER_OTLP_ENDPOINT or an exporter's WithEndpointURL (an HTTP
// exporter given a URL option needs the signal's path too: Endpoint() +
// "/v1/traces").
func (r *Receiver) Endpoint() string { return r.endpoint }

// Protocol is what OTEL_EXPORTER_OTLP_PROTOCOL must say for an exporter to
// reach the receiver: ProtocolHTTP for Start (which takes JSON too),
// ProtocolGRPC for StartGRPC.
func (r *Receiver) Protocol() string { return r.protocol }

// Spans returns every span received so far, in the order received.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Metrics returns every metric received so far, one per metric in each
// export, in the order received: a cumulative metric exported twice is
// there twice.
func (r *Receiver) Metrics() []Metric {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.metrics)
}

// Requests returns every export answered so far, in order.
func (r *Receiver) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests)
}

// Count is the number of exports of signal answered so far.
func (r *Receiver) Count(signal string) int {
	n := 0
	for _, q := range r.Requests() {
		if q.Signal == signal {
			n++
		}
	}
	return n
}

// WaitSpans waits until pred holds for the spans received so far and
// returns them; after timeout it fails the test, listing what it received.
func (r *Receiver) WaitSpans(t testing.TB, timeout time.Duration, pred func([]Span) bool) []Span {
	t.Helper()
	var spans []Span
	if !r.wait(timeout, func() bool { spans = r.Spans(); return pred(spans) }) {
		t.Fatalf("otlptest: the spans received in %v are not the ones expected; received:\n%s", timeout, Dump(spans))
	}
	return spans
}

// WaitMetric waits until a metric named name for which pred holds (nil:
// any) was received and returns the last such; after timeout it fails the
// test, listing the metrics it received.
func (r *Receiver) WaitMetric(t testing.TB, timeout time.Duration, name string, pred func(Metric) bool) Metric {
	t.Helper()
	var found Metric
	ok := r.wait(timeout, func() bool {
		ms := r.Metrics()
		for i := len(ms) - 1; i >= 0; i-- {
			if ms[i].Name == name && (pred == nil || pred(ms[i])) {
				found = ms[i]
				return true
			}
		}
		return false
	})
	if !ok {
		var b strings.Builder
		for _, m := range r.Metrics() {
			fmt.Fprintf(&b, "  %s\n", m)
		}
		t.Fatalf("otlptest: no metric %s as expected in %v; received:\n%s", name, timeout, b.String())
	}
	return found
}

// wait reports whether cond held before timeout, trying it again after
// every export.
func (r *Receiver) wait(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		if cond() {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return cond()
		}
	}
}

// add records one export and wakes the waiters.
func (r *Receiver) add(q Request, spans []Span, metrics []Metric) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, q)
	r.spans = append(r.spans, spans...)
	r.metrics = append(r.metrics, metrics...)
	close(r.changed)
	r.changed = make(chan struct{})
}

// fail records an export that could not be decoded.
func (r *Receiver) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

// report fails t with the exports that could not be decoded.
func (r *Receiver) report(t testing.TB) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, err := range r.errs {
		t.Errorf("otlptest: an export could not be decoded: %v", err)
	}
}
