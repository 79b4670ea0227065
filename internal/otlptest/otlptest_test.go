package otlptest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/otlptest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := mcptest.LeakCheck(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

const wait = 10 * time.Second

// exporters are the ways a test process exports to a receiver: each
// protocol, configured by options or by the standard environment variables,
// compressed or not.
var exporters = []struct {
	name     string
	start    func(testing.TB) *otlptest.Receiver
	env      bool // OTEL_EXPORTER_OTLP_* instead of options
	gzip     bool
	protocol string
}{
	{"http", otlptest.Start, false, false, otlptest.ProtocolHTTP},
	{"http-gzip-env", otlptest.Start, true, true, otlptest.ProtocolHTTP},
	{"grpc", otlptest.StartGRPC, false, false, otlptest.ProtocolGRPC},
	{"grpc-gzip-env", otlptest.StartGRPC, true, true, otlptest.ProtocolGRPC},
}

func setEnv(t *testing.T, r *otlptest.Receiver, gzip bool) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.Endpoint())
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", r.Protocol())
	if gzip {
		t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	}
}

func traceExporter(t *testing.T, r *otlptest.Receiver, env, gzip bool) sdktrace.SpanExporter {
	ctx := context.Background()
	var exp sdktrace.SpanExporter
	var err error
	switch {
	case env:
		setEnv(t, r, gzip)
		if r.Protocol() == otlptest.ProtocolGRPC {
			exp, err = otlptracegrpc.New(ctx)
		} else {
			exp, err = otlptracehttp.New(ctx)
		}
	case r.Protocol() == otlptest.ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(r.Endpoint()))
	default:
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(r.Endpoint()+"/v1/traces"))
	}
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

func metricExporter(t *testing.T, r *otlptest.Receiver, env, gzip bool) sdkmetric.Exporter {
	ctx := context.Background()
	var exp sdkmetric.Exporter
	var err error
	switch {
	case env:
		setEnv(t, r, gzip)
		if r.Protocol() == otlptest.ProtocolGRPC {
			exp, err = otlpmetricgrpc.New(ctx)
		} else {
			exp, err = otlpmetrichttp.New(ctx)
		}
	case r.Protocol() == otlptest.ProtocolGRPC:
		exp, err = otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpointURL(r.Endpoint()))
	default:
		exp, err = otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(r.Endpoint()+"/v1/metrics"))
	}
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

func caller() *resource.Resource {
	return resource.NewSchemaless(attribute.String("service.name", "caller"))
}

// TestSpans exports a SERVER span, its CLIENT child (linked to a span of
// another trace, failed, with an exception event) and that other span with
// the SDK's exporters, and checks what the receiver decoded.
func TestSpans(t *testing.T) {
	for _, e := range exporters {
		t.Run(e.name, func(t *testing.T) {
			r := e.start(t)
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(traceExporter(t, r, e.env, e.gzip)), sdktrace.WithResource(caller()))
			tr := tp.Tracer("otlptest-test")

			ctx, server := tr.Start(context.Background(), "tools/call echo", trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(
					attribute.String("mcp.method.name", "tools/call"),
					attribute.Int("n", 7),
					attribute.Bool("b", true),
					attribute.Float64("f", 1.5),
					attribute.StringSlice("ss", []string{"a", "b"}),
				))
			_, other := tr.Start(context.Background(), "other")
			other.End()
			_, client := tr.Start(ctx, "tools/call echo", trace.WithSpanKind(trace.SpanKindClient),
				trace.WithLinks(trace.Link{SpanContext: other.SpanContext()}))
			client.RecordError(errors.New("boom"))
			client.SetStatus(codes.Error, "boom")
			client.End()
			server.End()
			if err := tp.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}

			spans := r.WaitSpans(t, wait, func(s []otlptest.Span) bool { return len(s) >= 3 })
			if len(spans) != 3 {
				t.Fatalf("got %d spans:\n%s", len(spans), otlptest.Dump(spans))
			}
			traceID := server.SpanContext().TraceID().String()
			got := otlptest.InTrace(spans, traceID)
			if len(got) != 2 {
				t.Fatalf("trace %s has %d spans:\n%s", traceID, len(got), otlptest.Dump(spans))
			}
			byKind := map[string]otlptest.Span{}
			for _, s := range got {
				byKind[s.Kind] = s
			}
			srv, cli := byKind["SERVER"], byKind["CLIENT"]
			if srv.SpanID != server.SpanContext().SpanID().String() || srv.ParentSpanID != "" {
				t.Errorf("server span: %s", srv)
			}
			if cli.SpanID != client.SpanContext().SpanID().String() || cli.ParentSpanID != srv.SpanID {
				t.Errorf("client span is not the server span's child: %s", cli)
			}
			wantAttrs := map[string]any{"mcp.method.name": "tools/call", "n": int64(7), "b": true, "f": 1.5, "ss": []any{"a", "b"}}
			if !reflect.DeepEqual(srv.Attrs, wantAttrs) {
				t.Errorf("server attrs = %#v, want %#v", srv.Attrs, wantAttrs)
			}
			if srv.Name != "tools/call echo" || srv.Service() != "caller" || srv.Scope != "otlptest-test" || srv.Status.Code != "UNSET" {
				t.Errorf("server span: %s (scope %q)", srv, srv.Scope)
			}
			if srv.Start.IsZero() || srv.End.Before(srv.Start) || cli.Start.Before(srv.Start) {
				t.Errorf("times: server %v..%v, client from %v", srv.Start, srv.End, cli.Start)
			}
			wantLink := []otlptest.Link{{TraceID: other.SpanContext().TraceID().String(), SpanID: other.SpanContext().SpanID().String(), Attrs: map[string]any{}}}
			if !reflect.DeepEqual(cli.Links, wantLink) {
				t.Errorf("links = %+v, want %+v", cli.Links, wantLink)
			}
			if cli.Status != (otlptest.Status{Code: "ERROR", Message: "boom"}) {
				t.Errorf("status = %+v", cli.Status)
			}
			if len(cli.Events) != 1 || cli.Events[0].Name != "exception" || cli.Events[0].Attrs["exception.message"] != "boom" {
				t.Errorf("events = %+v", cli.Events)
			}

			reqs := r.Requests()
			if len(reqs) == 0 || r.Count(otlptest.Traces) != len(reqs) {
				t.Fatalf("requests = %+v", reqs)
			}
			items := 0
			for _, q := range reqs {
				items += q.Items
				wantEnc := map[bool]string{true: "gzip"}[e.gzip]
				if q.Protocol != e.protocol || q.Encoding != wantEnc || q.Header.Get("User-Agent") == "" {
					t.Errorf("request = %+v, want protocol %s, encoding %q and a User-Agent", q, e.protocol, wantEnc)
				}
			}
			if items != 3 {
				t.Errorf("requests carried %d spans", items)
			}
		})
	}
}

// TestMetrics exports a histogram recorded in a span (so with an exemplar
// of that span), a counter and a gauge, and checks what the receiver
// decoded.
func TestMetrics(t *testing.T) {
	for _, e := range exporters {
		t.Run(e.name, func(t *testing.T) {
			r := e.start(t)
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metricExporter(t, r, e.env, e.gzip))), sdkmetric.WithResource(caller()))
			m := mp.Meter("otlptest-test")
			tp := sdktrace.NewTracerProvider() // samples everything, exports nothing
			ctx, span := tp.Tracer("otlptest-test").Start(context.Background(), "call")

			h, err := m.Float64Histogram("mcp.server.operation.duration", metric.WithUnit("s"),
				metric.WithExplicitBucketBoundaries(0.1, 1, 10))
			if err != nil {
				t.Fatal(err)
			}
			h.Record(ctx, 0.25, metric.WithAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", "echo")))
			c, _ := m.Int64Counter("calls")
			c.Add(ctx, 3)
			g, _ := m.Int64Gauge("sessions")
			g.Record(ctx, 5, metric.WithAttributes(attribute.Bool("live", true)))
			span.End()
			if err := mp.Shutdown(context.Background()); err != nil { // collects and exports
				t.Fatal(err)
			}
			_ = tp.Shutdown(context.Background())

			hist := r.WaitMetric(t, wait, "mcp.server.operation.duration", nil)
			if hist.Kind != "histogram" || hist.Unit != "s" || hist.Temporality != "cumulative" || hist.Scope != "otlptest-test" || hist.Resource["service.name"] != "caller" {
				t.Errorf("histogram: %s %+v", hist, hist)
			}
			p, ok := hist.Point(map[string]any{"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo"})
			if !ok || p.Count != 1 || p.Sum != 0.25 || !reflect.DeepEqual(p.Bounds, []float64{0.1, 1, 10}) || !reflect.DeepEqual(p.Buckets, []uint64{0, 1, 0, 0}) {
				t.Fatalf("histogram point: %+v (found %v)", p, ok)
			}
			sc := span.SpanContext()
			if len(p.Exemplars) != 1 || p.Exemplars[0].TraceID != sc.TraceID().String() || p.Exemplars[0].SpanID != sc.SpanID().String() || p.Exemplars[0].Value != 0.25 {
				t.Errorf("exemplars = %+v, want one of span %s/%s", p.Exemplars, sc.TraceID(), sc.SpanID())
			}

			sum := r.WaitMetric(t, wait, "calls", nil)
			if sum.Kind != "sum" || !sum.Monotonic || len(sum.Points) != 1 || sum.Points[0].Value != 3 {
				t.Errorf("counter: %s %+v", sum, sum)
			}
			gauge := r.WaitMetric(t, wait, "sessions", func(m otlptest.Metric) bool { return len(m.Points) == 1 })
			if gp, ok := gauge.Point(map[string]any{"live": true}); gauge.Kind != "gauge" || !ok || gp.Value != 5 {
				t.Errorf("gauge: %s", gauge)
			}
			if r.Count(otlptest.Metrics) == 0 || r.Count(otlptest.Traces) != 0 {
				t.Errorf("requests = %+v", r.Requests())
			}
		})
	}
}

// TestJSON posts the OTLP/JSON example of the OTLP specification (hex ids,
// enums as numbers, 64-bit integers as strings) and gets a JSON answer.
func TestJSON(t *testing.T) {
	r := otlptest.Start(t)
	body := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"my.service"}}]},
	 "scopeSpans":[{"scope":{"name":"my.library","version":"1.0.0"},"spans":[{
	  "traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174","parentSpanId":"EEE19B7EC3C1B173",
	  "name":"I'm a server span","startTimeUnixNano":"1544712660000000000","endTimeUnixNano":"1544712661000000000","kind":2,
	  "attributes":[{"key":"my.span.attr","value":{"stringValue":"some value"}},{"key":"n","value":{"intValue":"42"}}],
	  "links":[{"traceId":"5b8efff798038103d269b633813fc60d","spanId":"eee19b7ec3c1b175"}],
	  "status":{"code":2,"message":"bad"}}]}]}]}`
	resp, err := http.Post(r.Endpoint()+"/v1/traces", "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || string(out) != "{}" {
		t.Fatalf("answer %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), out)
	}
	s := r.Spans()
	want := otlptest.Span{
		TraceID: "5b8efff798038103d269b633813fc60c", SpanID: "eee19b7ec3c1b174", ParentSpanID: "eee19b7ec3c1b173",
		Name: "I'm a server span", Kind: "SERVER",
		Attrs:    map[string]any{"my.span.attr": "some value", "n": int64(42)},
		Links:    []otlptest.Link{{TraceID: "5b8efff798038103d269b633813fc60d", SpanID: "eee19b7ec3c1b175", Attrs: map[string]any{}}},
		Status:   otlptest.Status{Code: "ERROR", Message: "bad"},
		Resource: map[string]any{"service.name": "my.service"}, Scope: "my.library",
		Start: time.Unix(1544712660, 0), End: time.Unix(1544712661, 0),
	}
	if len(s) != 1 || !reflect.DeepEqual(s[0], want) {
		t.Fatalf("spans = %+v\nwant %+v", s, want)
	}
	if q := r.Requests(); len(q) != 1 || q[0].Protocol != otlptest.ProtocolJSON {
		t.Errorf("requests = %+v", q)
	}
}

// TestLogs posts logs, which the receiver decodes and counts, and
// requests it does not take.
func TestLogs(t *testing.T) {
	r := otlptest.Start(t)
	msg, _ := proto.Marshal(&collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{SeverityText: "INFO"}, {SeverityText: "WARN"}}}},
	}}})
	post := func(path, ct string, body []byte) int {
		resp, err := http.Post(r.Endpoint()+path, ct, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/v1/logs", "application/x-protobuf", msg); code != 200 {
		t.Fatalf("logs: %d", code)
	}
	if code := post("/v1/logs", "text/plain", msg); code != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: %d", code)
	}
	if code := post("/v1/profiles", "application/x-protobuf", msg); code != http.StatusNotFound {
		t.Errorf("profiles: %d", code)
	}
	q := r.Requests()
	if r.Count(otlptest.Logs) != 1 || len(q) != 1 || q[0].Items != 2 {
		t.Errorf("requests = %+v", q)
	}
}
