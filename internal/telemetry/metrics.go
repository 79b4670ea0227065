package telemetry

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	prombridge "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/mcpconv"
	"go.opentelemetry.io/otel/trace"
)

// The MCP metrics of the conventions, in one pipeline with mcp-mux's own
// Prometheus series: a Prometheus reader on the same registry (so
// /metrics serves them beside the mcp_mux_* series, as
// mcp_server_operation_duration_seconds and so on), and with export on an
// OTLP reader too, which also carries the registry's mcp_mux_* series
// through the Prometheus bridge (go.opentelemetry.io/contrib/bridges/
// prometheus). Latency histograms carry the trace id of a sampled span as
// an exemplar.

// durationBuckets are the operation histograms' bounds, in seconds.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// maxSeries bounds the label sets of one instrument (the OTel SDK's
// overflow series takes the rest).
const maxSeries = 2000

// meters are the MCP instruments.
type meters struct {
	mp         *sdkmetric.MeterProvider
	server     mcpconv.ServerOperationDuration
	client     mcpconv.ClientOperationDuration
	session    mcpconv.ServerSessionDuration
	prometheus bool
	sets       attrSets // each series' attribute set, built once
}

// maxSets bounds attrSets; the series themselves are bounded by the
// cardinality limit and the names' labels (catalog.Label).
const maxSets = 4096

// setKey names one duration series.
type setKey struct {
	client                                               bool
	method, tool, prompt, protocol, transport, errorType string
}

// attrSets caches the attribute set of each duration series: building one
// (attribute.NewSet sorts and hashes) was most of a record's cost. Past
// maxSets a set is built and not kept.
type attrSets struct {
	m sync.Map // setKey → attribute.Set
	n atomic.Int32
}

// of returns k's attribute set.
func (c *attrSets) of(k setKey) attribute.Set {
	if s, ok := c.m.Load(k); ok {
		return s.(attribute.Set)
	}
	s := k.set()
	if c.n.Load() < maxSets {
		if _, loaded := c.m.LoadOrStore(k, s); !loaded {
			c.n.Add(1)
		}
	}
	return s
}

// set is the convention's low-cardinality attributes of k's series.
func (k setKey) set() attribute.Set {
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs, attribute.String("mcp.method.name", k.method))
	if k.tool != "" {
		attrs = append(attrs, semconv.GenAIToolName(k.tool), semconv.GenAIOperationNameExecuteTool)
	}
	if k.prompt != "" {
		attrs = append(attrs, semconv.GenAIPromptName(k.prompt))
	}
	if k.protocol != "" {
		attrs = append(attrs, semconv.McpProtocolVersion(k.protocol))
	}
	switch k.transport {
	case "tcp":
		attrs = append(attrs, semconv.NetworkTransportTCP)
	case "pipe":
		attrs = append(attrs, semconv.NetworkTransportPipe)
	}
	if k.errorType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(k.errorType))
	}
	return attribute.NewSet(attrs...)
}

// newMeters starts the meter provider: its Prometheus reader registers
// with reg (nil: none), its OTLP reader exports when otlp is set, with
// o.Gatherer's mcp_mux_* series.
func newMeters(ctx context.Context, reg prometheus.Registerer, res *resource.Resource, otlp bool, o Options, env func(string) (string, bool)) (*meters, error) {
	// Every label value is bounded at the edge (names not in the caller's
	// view are "_unknown"); the cardinality limit bounds each instrument's
	// label sets all the same (past it, one overflow series).
	opts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithCardinalityLimit(maxSeries), sdkmetric.WithView(sdkmetric.NewView(
		sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: durationBuckets}},
	))}
	if reg != nil {
		exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
		if err != nil {
			return nil, fmt.Errorf("telemetry: Prometheus metrics: %w", err)
		}
		opts = append(opts, sdkmetric.WithReader(exp))
	}
	if otlp {
		exp, err := metricExporter(ctx, o, env)
		if err != nil {
			return nil, err
		}
		var ro []sdkmetric.PeriodicReaderOption
		if o.Gatherer != nil {
			ro = append(ro, sdkmetric.WithProducer(prombridge.NewMetricProducer(prombridge.WithGatherer(muxSeries{o.Gatherer}))))
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, ro...)))
	}
	mp := sdkmetric.NewMeterProvider(opts...)
	meter := mp.Meter("github.com/mcp-mux/mcp-mux")
	m := &meters{mp: mp, prometheus: reg != nil}
	var err error
	if m.server, err = mcpconv.NewServerOperationDuration(meter); err != nil {
		return nil, err
	}
	if m.client, err = mcpconv.NewClientOperationDuration(meter); err != nil {
		return nil, err
	}
	if m.session, err = mcpconv.NewServerSessionDuration(meter); err != nil {
		return nil, err
	}
	return m, nil
}

// metricExporter is the OTLP metric exporter the protocol names.
func metricExporter(ctx context.Context, o Options, env func(string) (string, bool)) (sdkmetric.Exporter, error) {
	_, endpointEnv := env("OTEL_EXPORTER_OTLP_ENDPOINT")
	_, metricsEndpointEnv := env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
	useConfig := o.Endpoint != "" && !endpointEnv && !metricsEndpointEnv
	if protocol(o, env, "METRICS") == "grpc" {
		var opts []otlpmetricgrpc.Option
		if useConfig {
			opts = append(opts, otlpmetricgrpc.WithEndpointURL(o.Endpoint))
		}
		exp, err := otlpmetricgrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP/gRPC metric exporter: %w", err)
		}
		return exp, nil
	}
	var opts []otlpmetrichttp.Option
	if useConfig {
		opts = append(opts, otlpmetrichttp.WithEndpointURL(trimSlash(o.Endpoint)+"/v1/metrics"))
	}
	exp, err := otlpmetrichttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP/HTTP metric exporter: %w", err)
	}
	return exp, nil
}

// record adds a finished request's duration to its histogram, with the
// convention's low-cardinality attributes only (no ids, URIs or users).
func (t *Telemetry) record(s Span, errorType string) {
	if t.m == nil {
		return
	}
	d := time.Since(s.start).Seconds()
	op := s.op
	set := t.m.sets.of(setKey{client: s.kind == trace.SpanKindClient, method: string(mcpconv.MethodNameAttr(op.Method)), tool: op.Tool,
		prompt: op.Prompt, protocol: op.Protocol, transport: op.Transport, errorType: errorType})
	ctx := s.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if s.s != nil {
		ctx = trace.ContextWithSpan(ctx, s.s) // the exemplar's trace
	}
	if s.kind == trace.SpanKindClient {
		// No server name: the OTel SDK cannot delete a removed server's
		// series (mcp_mux_tool_call_duration_seconds has them by server).
		t.m.client.RecordSet(ctx, d, set)
		return
	}
	t.m.server.RecordSet(ctx, d, set)
}

// SessionEnded records a downstream session's duration.
func (t *Telemetry) SessionEnded(started time.Time, protocol string) {
	if t == nil || t.m == nil {
		return
	}
	t.m.session.Record(context.Background(), time.Since(started).Seconds(), semconv.McpProtocolVersion(protocol), semconv.NetworkTransportTCP)
}

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}
