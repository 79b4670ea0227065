package telemetry

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// signals says which signals go over OTLP, and what turned each on
// ("config" or "environment"; "" when off). In order:
//
//  1. OTEL_SDK_DISABLED=true: none.
//  2. The block's explicit "enabled": false (Options.Off): none. The file is
//     the deployment's own switch; a variable a platform injects into every
//     pod does not override it.
//  3. OTEL_TRACES_EXPORTER=none, OTEL_METRICS_EXPORTER=none: not that signal.
//  4. Otherwise a signal is on when the block says "enabled": true, or its
//     OTEL_<SIGNAL>_EXPORTER names otlp, or OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT is set.
func signals(o Options, env func(string) (string, bool)) (traces, metrics string) {
	if envIs(env, "OTEL_SDK_DISABLED", "true") || o.Off {
		return "", ""
	}
	return signalOn(o, env, "TRACES"), signalOn(o, env, "METRICS")
}

// signalOn is one signal's part of signals.
func signalOn(o Options, env func(string) (string, bool), signal string) string {
	exporters := exporterList(env, "OTEL_"+signal+"_EXPORTER")
	switch {
	case slices.Contains(exporters, "none"):
		return ""
	case o.Enabled:
		return "config"
	case slices.Contains(exporters, "otlp"), set(env, "OTEL_EXPORTER_OTLP_ENDPOINT"), set(env, "OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT"):
		return "environment"
	}
	return ""
}

// exporterList is a comma-separated OTEL_*_EXPORTER value, each name
// trimmed and lower-cased.
func exporterList(env func(string) (string, bool), name string) []string {
	v, _ := env(name)
	var out []string
	for e := range strings.SplitSeq(v, ",") {
		if e = strings.ToLower(strings.TrimSpace(e)); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// unsupportedExporters returns the names in the OTEL_*_EXPORTER variables
// mcp-mux does not export to (it has OTLP only), as NAME=value.
func unsupportedExporters(env func(string) (string, bool)) []string {
	var out []string
	for _, name := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"} {
		for _, e := range exporterList(env, name) {
			if e != "otlp" && e != "none" {
				out = append(out, name+"="+e)
			}
		}
	}
	return out
}

// set reports whether the variable name is set and not blank.
func set(env func(string) (string, bool), name string) bool {
	v, _ := env(name)
	return strings.TrimSpace(v) != ""
}

// muxSeriesPrefix names mcp-mux's own Prometheus series.
const muxSeriesPrefix = "mcp_mux_"

// muxSeries gathers only the mcp_mux_* families of a registry, for the
// Prometheus bridge: the registry serves the MCP histograms too (the
// Prometheus reader), which go over OTLP on their own, and the Go runtime
// and process series, which are left to /metrics.
type muxSeries struct{ g prometheus.Gatherer }

// Gather implements prometheus.Gatherer.
func (m muxSeries) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := m.g.Gather()
	return slices.DeleteFunc(mfs, func(f *dto.MetricFamily) bool { return !strings.HasPrefix(f.GetName(), muxSeriesPrefix) }), err
}
