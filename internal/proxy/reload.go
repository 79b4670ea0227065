package proxy

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/proxy/reload"
	"github.com/mcp-mux/mcp-mux/internal/status"
)

// Reload outcomes (the outcome label of mcp_mux_reloads_total).
const (
	ReloadApplied  = status.ReloadApplied
	ReloadPartial  = status.ReloadPartial
	ReloadRejected = status.ReloadRejected
)

// maxReloadEvents is how many reload events Reloads keeps.
const maxReloadEvents = 20

// ReloadEvent is one reload attempt.
type ReloadEvent = status.ReloadEvent

// reloadLog keeps the recent reload events and their metrics.
type reloadLog struct {
	mu          sync.Mutex
	events      []ReloadEvent
	total       *prometheus.CounterVec
	lastSuccess prometheus.Gauge
}

func (l *reloadLog) register(reg *prometheus.Registry) {
	l.total = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcp_mux_reloads_total",
		Help: "Config reloads by outcome (applied, partial: some servers kept their running settings, rejected: the last good config keeps serving).",
	}, []string{"outcome"})
	l.lastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "mcp_mux_last_reload_success_timestamp_seconds",
		Help: "Unix time of the last reload that applied a config (applied or partial); 0 before the first.",
	})
	for _, o := range []string{ReloadApplied, ReloadPartial, ReloadRejected} {
		l.total.WithLabelValues(o)
	}
	reg.MustRegister(l.total, l.lastSuccess)
}

func (l *reloadLog) record(ev ReloadEvent) {
	l.total.WithLabelValues(ev.Outcome).Inc()
	if ev.Outcome != ReloadRejected {
		l.lastSuccess.Set(float64(ev.Time.UnixNano()) / 1e9)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == maxReloadEvents {
		l.events = append(l.events[:0], l.events[1:]...)
	}
	l.events = append(l.events, ev)
}

// Reload applies a config read for a reload and records the attempt. loadErr
// is the error config.Load or config.Parse returned: with it, nothing changes
// and the last good config keeps serving. Each problem is logged.
func (s *Server) Reload(trigger string, cfg *config.Config, loadErr error) ReloadEvent {
	ev := ReloadEvent{Time: time.Now(), Trigger: trigger, Outcome: ReloadApplied}
	if loadErr == nil && cfg == nil {
		loadErr = errors.New("no config")
	}
	if loadErr == nil {
		prev := s.rt.Load().Config
		var problems []config.Problem
		problems, loadErr = s.apply(cfg, false)
		if loadErr == nil {
			for _, se := range cfg.Invalid {
				ev.Problems = append(ev.Problems, se.Error())
			}
			for _, p := range problems {
				ev.Outcome = ReloadPartial
				ev.Problems = append(ev.Problems, p.Error())
			}
			rt := s.rt.Load()
			ev.Changes = reload.Changes(prev, cfg)
			ev.Warnings = slices.Concat(rt.Warnings, rt.Catalog.Load().Warnings())
		}
	}
	if loadErr != nil {
		ev.Outcome = ReloadRejected
		ev.Problems = problemTexts(cfg, loadErr)
	}
	for _, p := range ev.Problems {
		s.log.Warn("reload problem", "trigger", trigger, "outcome", ev.Outcome, "problem", p)
	}
	if ev.Outcome != ReloadRejected {
		s.log.Info("config reloaded", "trigger", trigger, "outcome", ev.Outcome, "servers", len(s.rt.Load().Backends), "changes", len(ev.Changes))
	}
	ev.Problems, ev.Changes, ev.Warnings = status.Bound(ev.Problems), status.Bound(ev.Changes), status.Bound(ev.Warnings)
	s.reloads.record(ev)
	return ev
}

// problemTexts lists a failed load's problems, one text each.
func problemTexts(cfg *config.Config, err error) []string {
	var out []string
	if ps := config.Problems(err); len(ps) > 0 {
		file := ""
		if cfg != nil {
			file = cfg.Path
		}
		for _, p := range ps {
			out = append(out, p.Format(file))
		}
		return out
	}
	return []string{err.Error()}
}

// Reloads returns the recent reload events, oldest first (at most 20).
func (s *Server) Reloads() []ReloadEvent {
	s.reloads.mu.Lock()
	defer s.reloads.mu.Unlock()
	out := make([]ReloadEvent, len(s.reloads.events))
	copy(out, s.reloads.events)
	return out
}

// Config returns the running config (the last one applied). Treat it as
// read-only.
func (s *Server) Config() *config.Config { return s.rt.Load().Config }
