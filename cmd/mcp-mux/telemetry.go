package main

import (
	"github.com/hashicorp/go-hclog"
	"github.com/mcp-mux/mcp-mux/audit"
	"go.opentelemetry.io/otel"

	"github.com/mcp-mux/mcp-mux/config"
	"github.com/mcp-mux/mcp-mux/secret"
	"github.com/mcp-mux/mcp-mux/telemetry"
)

// routeOTelErrors sends OpenTelemetry's export errors (its global error
// handler) to log, with the endpoint's credentials scrubbed: left alone,
// the SDK prints them in plain text on stderr, in the middle of JSON logs.
func routeOTelErrors(t config.Telemetry, env func(string) (string, bool), log hclog.Logger) {
	var s secret.Scrubber
	s.AddURL(t.Endpoint.Reveal())
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if v, ok := env(name); ok {
			s.AddURL(v)
			s.Add(v)
		}
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("telemetry: export failed", "err", s.Scrub(err.Error()))
	}))
}

// telemetryOptions maps the telemetry block to package telemetry's
// options (the OTEL_* variables, read through env, win over it).
func telemetryOptions(t config.Telemetry, env func(string) (string, bool), log hclog.Logger) telemetry.Options {
	return telemetry.Options{Enabled: t.Enabled, Endpoint: t.Endpoint.Reveal(), Protocol: t.Protocol, SampleRatio: t.SampleRatio,
		TrustParent: t.TrustParent, UserID: t.UserID, Version: version, Env: env, Log: log.Named("telemetry")}
}

// openAudit starts the audit records the telemetry.audit block asks for
// (the recent slow and failed calls are kept even with records off).
func openAudit(a config.Audit, log hclog.Logger) (*audit.Auditor, error) {
	return audit.New(audit.Options{Enabled: a.Enabled, Output: a.Output, MaxFileBytes: int64(a.MaxFileMB) << 20, Detail: a.Detail,
		UserID: a.UserID, Slow: a.SlowCall, Log: log.Named("audit")})
}

// closeAudit writes the records still queued.
func closeAudit(a *audit.Auditor, log hclog.Logger) {
	if err := a.Close(); err != nil {
		log.Warn("closing the audit output", "err", err)
	}
}
