// Package telemetry is mcp-mux's OpenTelemetry: traces in the MCP
// semantic conventions (OTel semconv v1.41.0, the "mcp" namespace, as
// open-telemetry/semantic-conventions-genai v0.1.0 docs/gen-ai/mcp.md
// states them), exported over OTLP (HTTP or gRPC).
//
// A SERVER span covers each downstream MCP request (Server), a CLIENT span
// each request mcp-mux sends an upstream (Client); the trace context rides
// a request's params._meta as unprefixed traceparent and tracestate
// (SEP-414), and for HTTP also its headers. A caller's trace is continued
// from its _meta, else from its HTTP headers; its sampled flag and its
// tracestate count only from a trusted parent, its baggage never (parent.go).
//
// Metrics in the conventions (mcp.server.operation.duration and the rest)
// are recorded always, beside mcp-mux's own Prometheus series; export
// (traces and metrics over OTLP, the mcp_mux_* series with the MCP ones) is
// off by default, turned on by the config block or the standard OTEL_*
// variables (export.go says which wins). With it off no span is started,
// and a caller's trace context goes upstream only from a trusted parent.
// The OTEL_* variables configure the exporters, the sampler and the
// resource, and win over the config block's settings.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// SchemaURL is the semantic conventions version the attributes follow.
const SchemaURL = semconv.SchemaURL

// Options configure New.
type Options struct {
	// Enabled turns export on (the block's "enabled": true);
	// OTEL_SDK_DISABLED=true or OTEL_<SIGNAL>_EXPORTER=none turn it off
	// again (signals).
	Enabled bool
	// Off is the block's explicit "enabled": false: the OTEL_* variables
	// do not turn export on.
	Off bool
	// Endpoint is the OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT and
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT win); empty: the exporter's default.
	Endpoint string
	// Protocol is "http/protobuf" (default) or "grpc"
	// (OTEL_EXPORTER_OTLP_PROTOCOL and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL win).
	Protocol string
	// SampleRatio samples new traces and those of callers whose parent is
	// not trusted (OTEL_TRACES_SAMPLER wins); 0 means 1.
	SampleRatio float64
	// UserID is how caller ids appear: "hashed" (default), "plain", "none".
	UserID string
	// TrustParent takes a caller's trace context as the operator's: its
	// sampled flag decides (parent-based sampling) and its tracestate goes
	// upstream. Off, the trace id is continued but sample_ratio decides and
	// the tracestate is dropped (parent.go). A caller's baggage is never
	// forwarded.
	TrustParent bool
	// IDs hashes caller ids; give audit.Options the same, so spans and
	// records of a caller match. Nil: a random key of this Telemetry's own.
	IDs *secret.IDHash
	// Version is mcp-mux's version (service.version).
	Version string
	// Env looks up an environment variable (os.LookupEnv when nil).
	Env func(string) (string, bool)
	// Registerer serves the MCP metrics beside mcp-mux's Prometheus
	// series (nil: they are not served there).
	Registerer prometheus.Registerer
	// Gatherer's mcp_mux_* series go over OTLP with the MCP metrics while
	// metric export is on (nil: none).
	Gatherer prometheus.Gatherer
	Log      hclog.Logger
}

// Telemetry starts mcp-mux's spans and records its MCP metrics. A nil
// *Telemetry does neither; one whose export is off records the metrics
// (for /metrics) and starts no span.
type Telemetry struct {
	tracing bool
	trust   bool // Options.TrustParent
	tp      *sdktrace.TracerProvider
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator // W3C trace context; never baggage (parent.go)
	userID  string
	ids     *secret.IDHash
	m       *meters
}

// New returns the Telemetry o asks for.
func New(ctx context.Context, o Options) (*Telemetry, error) {
	env := o.Env
	if env == nil {
		env = os.LookupEnv
	}
	t := &Telemetry{trust: o.TrustParent, prop: propagation.TraceContext{}, userID: o.UserID, ids: o.IDs}
	if t.ids == nil {
		t.ids = secret.NewIDHash("")
	}
	traces, metrics := signals(o, env)
	if bad := unsupportedExporters(env); len(bad) > 0 && o.Log != nil {
		o.Log.Warn("telemetry: mcp-mux exports over OTLP only; these exporters are ignored", "exporters", strings.Join(bad, ", "))
	}
	// Schemaless: the SDK's default resource follows a newer schema than
	// the conventions pinned here, and two schemas do not merge.
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName("mcp-mux"), semconv.ServiceVersion(o.Version)))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the defaults.
	if fromEnv, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, fromEnv); err == nil {
			res = merged
		}
	}
	if t.m, err = newMeters(ctx, o.Registerer, res, metrics != "", o, env); err != nil {
		return nil, err
	}
	if metrics != "" && o.Log != nil {
		o.Log.Info("telemetry: exporting metrics over OTLP", "protocol", protocol(o, env, "METRICS"), "turned_on_by", metrics)
	}
	if traces == "" {
		return t, nil
	}
	exp, err := exporter(ctx, o, env)
	if err != nil {
		_ = t.m.mp.Shutdown(ctx)
		return nil, err
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if _, set := env("OTEL_TRACES_SAMPLER"); !set {
		ratio := o.SampleRatio
		if ratio <= 0 || ratio > 1 {
			ratio = 1
		}
		opts = append(opts, sdktrace.WithSampler(sampler(ratio, o.TrustParent))) // parent.go
	}
	t.tp = sdktrace.NewTracerProvider(opts...)
	t.tracer = t.tp.Tracer("github.com/mcp-mux/mcp-mux", trace.WithInstrumentationVersion(o.Version), trace.WithSchemaURL(semconv.SchemaURL))
	t.tracing = true
	if o.Log != nil {
		o.Log.Info("telemetry: exporting traces over OTLP", "protocol", protocol(o, env, "TRACES"), "turned_on_by", traces)
	}
	return t, nil
}

// envIs reports whether the variable name is set to want (any case).
func envIs(env func(string) (string, bool), name, want string) bool {
	v, _ := env(name)
	return strings.EqualFold(strings.TrimSpace(v), want)
}

// protocol is the OTLP protocol of a signal (TRACES, METRICS): the
// variables', else o's.
func protocol(o Options, env func(string) (string, bool), signal string) string {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v, ok := env(name); ok && v != "" {
			return v
		}
	}
	if o.Protocol != "" {
		return o.Protocol
	}
	return "http/protobuf"
}

// exporter returns the OTLP span exporter o and the environment ask for;
// the exporters read the rest of OTEL_EXPORTER_OTLP_* themselves.
func exporter(ctx context.Context, o Options, env func(string) (string, bool)) (*otlptrace.Exporter, error) {
	_, endpointEnv := env("OTEL_EXPORTER_OTLP_ENDPOINT")
	_, tracesEndpointEnv := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	useConfig := o.Endpoint != "" && !endpointEnv && !tracesEndpointEnv
	switch p := protocol(o, env, "TRACES"); p {
	case "grpc":
		var opts []otlptracegrpc.Option
		if useConfig {
			opts = append(opts, otlptracegrpc.WithEndpointURL(o.Endpoint))
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP/gRPC exporter: %w", err)
		}
		return exp, nil
	case "http/protobuf", "http":
		var opts []otlptracehttp.Option
		if useConfig {
			opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(o.Endpoint, "/")+"/v1/traces"))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP/HTTP exporter: %w", err)
		}
		return exp, nil
	default:
		return nil, fmt.Errorf("telemetry: OTLP protocol %q is not one of http/protobuf, grpc", p)
	}
}

// Shutdown flushes the spans and metrics still buffered and stops export.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.tp != nil {
		if err := t.tp.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("telemetry: flushing spans: %w", err))
		}
	}
	if t.m != nil {
		if err := t.m.mp.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("telemetry: flushing metrics: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Enabled reports whether t does anything (spans or metrics).
func (t *Telemetry) Enabled() bool { return t != nil }

// Tracing reports whether t starts spans.
func (t *Telemetry) Tracing() bool { return t != nil && t.tracing }

// userAttr is the user.id attribute of a caller, as configured.
func (t *Telemetry) userAttr(user string) (attribute.KeyValue, bool) {
	switch t.userID {
	case "none":
		return attribute.KeyValue{}, false
	case "plain":
		return semconv.UserID(user), true
	}
	return semconv.UserID(t.ids.Of(user)), true
}

// Start is New for a Server: when export cannot start, the metrics still
// do (the reason is logged); nil when not even they can.
func Start(o Options, log hclog.Logger) *Telemetry {
	if o.Log == nil {
		o.Log = log.Named("telemetry")
	}
	t, err := New(context.Background(), o)
	if err == nil {
		return t
	}
	log.Error("telemetry: export is off", "err", err)
	t, err = New(context.Background(), Options{Registerer: o.Registerer})
	if err != nil {
		log.Error("telemetry: the MCP metrics are off", "err", err)
		return nil
	}
	return t
}
