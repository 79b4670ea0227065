package main

import (
	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel"

	"github.com/mcp-mux/mcp-mux/internal/audit"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
)

// routeOTelErrors sends OpenTelemetry's export errors (its global error
// handler) to log, with the endpoint's credentials scrubbed: left alone,
// the SDK prints them in plain text on stderr, in the middle of JSON logs.
func routeOTelErrors(t config.Telemetry, env func(string) (string, bool), log hclog.Logger) {
	var s secret.Scrubber
	s.AddURL(t.Endpoint.Reveal())
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_HEADERS"} {
		if v, ok := env(name); ok {
			s.AddURL(v)
			s.Add(v)
		}
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("telemetry: export failed", "err", s.Scrub(err.Error()))
	}))
}

// callerIDs hashes caller ids in spans and audit records under the
// secret the replicas share: inbound.request_state_key, else the key
// they share through Redis (stateKey, sessionstore.SharedKey), so every
// replica gives a caller one hash; with neither, a random key of this
// process (hashes then match within it only). The key is the one at
// startup.
func callerIDs(cfg *config.Config, stateKey string) *secret.IDHash {
	if k := cfg.Inbound.RequestStateKey.Reveal(); k != "" {
		return secret.NewIDHash(k)
	}
	return secret.NewIDHash(stateKey)
}

// telemetryOptions maps the telemetry block to package telemetry's
// options (the OTEL_* variables, read through env, win over it); ids hash
// the callers.
func telemetryOptions(t config.Telemetry, ids *secret.IDHash, env func(string) (string, bool), log hclog.Logger) telemetry.Options {
	return telemetry.Options{Enabled: t.Enabled, Off: t.Off, Endpoint: t.Endpoint.Reveal(), Protocol: t.Protocol, SampleRatio: t.SampleRatio,
		TrustParent: t.TrustParent, UserID: t.UserID, IDs: ids, Version: version, Env: env, Log: log.Named("telemetry")}
}

// openAudit starts the audit records the telemetry.audit block asks for
// (the recent slow and failed calls are kept even with records off); ids
// hash the callers, as in spans.
func openAudit(a config.Audit, ids *secret.IDHash, log hclog.Logger) (*audit.Auditor, error) {
	return audit.New(audit.Options{Enabled: a.Enabled, Output: a.Output, MaxFileBytes: int64(a.MaxFileMB) << 20, Detail: a.Detail,
		UserID: a.UserID, Slow: a.SlowCall, IDs: ids, Log: log.Named("audit")})
}

// closeAudit writes the records still queued.
func closeAudit(a *audit.Auditor, log hclog.Logger) {
	if err := a.Close(); err != nil {
		log.Warn("closing the audit output", "err", err)
	}
}
