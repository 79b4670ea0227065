package main

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// variant is one telemetry setting of a mux process.
type variant struct {
	name  string  // "off", "tel" and the sampled percentage, or a limits variant
	ratio float64 // share of new traces sampled; 0: export off
	// limits is the limits rule of a limits variant (telemetry off): a
	// budget shared through Redis (-redis) that never refuses.
	limits string
	// policy is a policy variant's kind (telemetry off): "cel", one
	// policy.rules rule that reads the arguments and never denies, or
	// "authzen", a policy.authzen decision from a local endpoint that
	// always allows, or "processor", one response-phase external processor
	// (a local endpoint that decodes each request and passes it).
	policy string
	// guards is a guards variant's result_guards block (telemetry off):
	// redaction and a budget no result reaches.
	guards string
}

// guardVariants are the mux variants with the built-in result guards on
// every result: redaction with a budget that never triggers.
var guardVariants = map[string]string{
	"guards": `{"redact": true, "max_result_chars": 1000000}`,
}

// limitVariants are the mux variants with a Redis-shared limit on the
// call path: a rate (one round trip), and a rate with calls in flight
// (three: the lease taken, the rate, the lease returned).
var limitVariants = map[string]string{
	"limits":          `{"name": "bench", "scope": "caller_tool", "calls": 1000000, "per_seconds": 1}`,
	"limits-inflight": `{"name": "bench", "scope": "caller_tool", "calls": 1000000, "per_seconds": 1, "in_flight": 100000}`,
}

// parseVariants reads the -telemetry list: "off", or a percentage of new
// traces sampled with export on (the client sends no traceparent, so the
// mux's root sampler decides).
func parseVariants(s string) ([]variant, error) {
	var vs []variant
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(f), "%"))
		if f == "off" {
			vs = append(vs, variant{name: "off"})
			continue
		}
		if rule, ok := limitVariants[f]; ok {
			vs = append(vs, variant{name: f, limits: rule})
			continue
		}
		if block, ok := guardVariants[f]; ok {
			vs = append(vs, variant{name: f, guards: block})
			continue
		}
		if f == "cel" || f == "authzen" || f == "processor" {
			vs = append(vs, variant{name: f, policy: f})
			continue
		}
		pct, err := strconv.ParseFloat(f, 64)
		if err != nil || pct <= 0 || pct > 100 {
			return nil, fmt.Errorf("bad variant %q: want off, limits, limits-inflight, cel, authzen, processor, guards or a percentage in (0, 100]", f)
		}
		vs = append(vs, variant{name: "tel" + f, ratio: pct / 100})
	}
	return vs, nil
}

// suffix is what the variant adds to a leg's name ("" for off, so that the
// off rows keep today's names).
func (v variant) suffix() string {
	if v.ratio == 0 && v.limits == "" && v.policy == "" && v.guards == "" {
		return ""
	}
	return "/" + v.name
}

// spansPath reports the spans the OTLP receiver decoded, one "variant count"
// line per variant.
const spansPath = "/bench/spans"

// otlpHandler is a minimal OTLP/HTTP receiver: it decodes the trace exports
// posted to /{variant}/v1/traces (each mux exports to its own variant's
// prefix) and counts their spans, and takes metric exports unread. It keeps
// counts only, so that a long run does not grow it.
func otlpHandler() http.Handler {
	var (
		mu    sync.Mutex
		spans = map[string]int{}
	)
	ok := func(w http.ResponseWriter) {
		// An empty Export*ServiceResponse is an empty protobuf body.
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{variant}/v1/traces", func(w http.ResponseWriter, r *http.Request) {
		n, err := countSpans(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		spans[r.PathValue("variant")] += n
		mu.Unlock()
		ok(w)
	})
	mux.HandleFunc("POST /{variant}/v1/metrics", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		ok(w)
	})
	mux.HandleFunc("GET "+spansPath, func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		for k, n := range spans {
			fmt.Fprintf(w, "%s %d\n", k, n)
		}
	})
	return mux
}

// countSpans decodes a protobuf trace export and counts its spans.
func countSpans(r *http.Request) (int, error) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return 0, err
		}
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		return 0, err
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		return 0, err
	}
	n := 0
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
		}
	}
	return n, nil
}

// exportedSpans asks the receiver at addr for its span counts by variant.
func exportedSpans(addr string) (map[string]int, error) {
	resp, err := http.Get("http://" + addr + spansPath)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		n, _ := strconv.Atoi(v)
		counts[k] = n
	}
	return counts, sc.Err()
}
