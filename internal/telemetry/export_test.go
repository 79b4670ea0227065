package telemetry

import (
	"testing"
)

// TestSignals: which signals go over OTLP, from the block and the OTEL_*
// variables, in the documented order (issue 39: the variables alone turned
// nothing on).
func TestSignals(t *testing.T) {
	for _, tc := range []struct {
		name            string
		enabled, off    bool
		env             map[string]string
		traces, metrics string
	}{
		{name: "nothing set"},
		{name: "config on", enabled: true, traces: "config", metrics: "config"},
		{name: "traces exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, traces: "environment"},
		{name: "metrics exporter", env: map[string]string{"OTEL_METRICS_EXPORTER": " OTLP "}, metrics: "environment"},
		{name: "exporter list", env: map[string]string{"OTEL_TRACES_EXPORTER": "console,otlp"}, traces: "environment"},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, traces: "environment", metrics: "environment"},
		{name: "blank endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": " "}},
		{name: "traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, traces: "environment"},
		{name: "metrics endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4318/v1/metrics"}, metrics: "environment"},
		{name: "endpoint, traces none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, metrics: "environment"},
		{name: "config on, metrics none", enabled: true, env: map[string]string{"OTEL_METRICS_EXPORTER": "none"}, traces: "config"},
		{name: "sdk disabled", enabled: true, env: map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "config off wins", off: true, env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "other exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}},
	} {
		env := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
		traces, metrics := signals(Options{Enabled: tc.enabled, Off: tc.off}, env)
		if traces != tc.traces || metrics != tc.metrics {
			t.Errorf("%s: traces %q, metrics %q; want %q, %q", tc.name, traces, metrics, tc.traces, tc.metrics)
		}
	}
	env := func(k string) (string, bool) {
		return map[string]string{"OTEL_TRACES_EXPORTER": "zipkin,otlp", "OTEL_METRICS_EXPORTER": "prometheus"}[k], true
	}
	if got := unsupportedExporters(env); len(got) != 2 || got[0] != "OTEL_TRACES_EXPORTER=zipkin" || got[1] != "OTEL_METRICS_EXPORTER=prometheus" {
		t.Errorf("unsupported exporters %q", got)
	}
}
