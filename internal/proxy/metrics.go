package proxy

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/inbound"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
)

// metrics are the Server's Prometheus metrics, on a registry of its own.
type metrics struct {
	reg       *prometheus.Registry
	calls     *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	discovery *prometheus.HistogramVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_mux_tool_calls_total",
			Help: "tools/call requests forwarded upstream, by server and outcome (ok: a result, which may be a tool error; error: no result).",
		}, []string{"server", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcp_mux_tool_call_duration_seconds",
			Help:    "Time from receiving a tools/call to having its upstream result, by server and outcome.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10), // 0.5 ms … ~2 min
		}, []string{"server", "outcome"}),
		discovery: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcp_mux_upstream_discovery_duration_seconds",
			Help:    "Time a discovery round (connect, initialize, list everything) took, by server and outcome (ok, error).",
			Buckets: prometheus.ExponentialBuckets(0.005, 3, 9), // 5 ms … ~33 s
		}, []string{"server", "outcome"}),
	}
	m.reg.MustRegister(m.calls, m.duration, m.discovery, stateCollector{s}, accountsCollector{s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) forServer(name string) *callpath.CallMetrics {
	return &callpath.CallMetrics{
		OK:        m.calls.WithLabelValues(name, "ok"),
		Failed:    m.calls.WithLabelValues(name, "error"),
		OKDur:     m.duration.WithLabelValues(name, "ok"),
		FailedDur: m.duration.WithLabelValues(name, "error"),
	}
}

// observeDiscovery is an upstream's Options.OnDiscovery.
func (m *metrics) observeDiscovery(name string) func(time.Duration, bool) {
	return func(d time.Duration, ok bool) {
		outcome := "ok"
		if !ok {
			outcome = "error"
		}
		m.discovery.WithLabelValues(name, outcome).Observe(d.Seconds())
	}
}

// forget deletes a removed server's series, so that dashboards do not show
// servers that no longer exist. The gauges come from the running backends
// at scrape time and need no deleting.
func (m *metrics) forget(name string) {
	for _, vec := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.calls, m.duration, m.discovery} {
		vec.DeletePartialMatch(prometheus.Labels{"server": name})
	}
}

// metricsGate serves /metrics on the main listener to whom the current
// config's admin.metrics says: anyone (open), a request presenting the
// admin token (admin_token: 401 otherwise, with both challenges), no one
// (ops_listener: 404, as an unknown route).
func (s *Server) metricsGate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var adm config.Admin
		if cfg := s.Config(); cfg != nil {
			adm = cfg.Admin
		}
		switch adm.Metrics {
		case config.MetricsOpsListener:
			http.NotFound(w, r)
			return
		case config.MetricsAdminToken:
			if !inbound.PresentsToken(r, adm.Token.Reveal()) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-mux metrics"`)
				w.Header().Add("WWW-Authenticate", `Basic realm="mcp-mux metrics", charset="UTF-8"`)
				http.Error(w, "/metrics needs the admin token (bearer, or as the Basic auth password)", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (m *metrics) handler() http.Handler {
	// OpenMetrics when asked for (Accept): the latency histograms'
	// exemplars carry the trace ids of sampled calls.
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// stateCollector reports the current runtime at scrape time.
type stateCollector struct{ s *Server }

var (
	upDesc       = prometheus.NewDesc("mcp_mux_upstream_up", "1 when the server's last discovery succeeded.", []string{"server"}, nil)
	toolsDesc    = prometheus.NewDesc("mcp_mux_upstream_tools", "Tools the server listed.", []string{"server"}, nil)
	upSessDesc   = prometheus.NewDesc("mcp_mux_upstream_sessions", "Pooled call sessions with the server.", []string{"server"}, nil)
	procsDesc    = prometheus.NewDesc("mcp_mux_stdio_processes", "Running stdio server processes, by server.", []string{"server"}, nil)
	reconnDesc   = prometheus.NewDesc("mcp_mux_upstream_reconnects_total", "Sessions with the server re-established after they ended (discovery session, and call sessions retried before the request ran).", []string{"server"}, nil)
	sessionsDesc = prometheus.NewDesc("mcp_mux_sessions", "Downstream MCP sessions.", nil, nil)
	catalogDesc  = prometheus.NewDesc("mcp_mux_catalog_tools", "Tools in the aggregated catalog.", nil, nil)
)

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{upDesc, toolsDesc, upSessDesc, procsDesc, reconnDesc, sessionsDesc, catalogDesc} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	rt := c.s.rt.Load()
	for _, b := range rt.Backends {
		up := 0.0
		if b.Up.State() == StateUp {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up, b.Name)
		ch <- prometheus.MustNewConstMetric(toolsDesc, prometheus.GaugeValue, float64(len(b.Up.Tools())), b.Name)
		ch <- prometheus.MustNewConstMetric(upSessDesc, prometheus.GaugeValue, float64(b.Up.Sessions()), b.Name)
		ch <- prometheus.MustNewConstMetric(procsDesc, prometheus.GaugeValue, float64(b.Up.Processes()), b.Name)
		ch <- prometheus.MustNewConstMetric(reconnDesc, prometheus.CounterValue, float64(b.Up.Reconnects()), b.Name)
	}
	ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(c.s.sessions.Count()))
	ch <- prometheus.MustNewConstMetric(catalogDesc, prometheus.GaugeValue, float64(rt.Catalog.Load().Len()))
}
