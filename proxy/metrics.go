package proxy

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the Server's Prometheus metrics, on a registry of its own.
type metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
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
			Help:    "Time from receiving a tools/call to having its upstream result, by server.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10), // 0.5 ms … ~2 min
		}, []string{"server"}),
	}
	m.reg.MustRegister(m.calls, m.duration, stateCollector{s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// callMetrics are one server's pre-resolved series, so that recording a
// call costs no label lookups.
type callMetrics struct {
	ok, failed prometheus.Counter
	duration   prometheus.Observer
}

func (m *metrics) forServer(name string) *callMetrics {
	return &callMetrics{
		ok:       m.calls.WithLabelValues(name, "ok"),
		failed:   m.calls.WithLabelValues(name, "error"),
		duration: m.duration.WithLabelValues(name),
	}
}

func (c *callMetrics) record(start time.Time, err error) {
	c.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		c.failed.Inc()
	} else {
		c.ok.Inc()
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// stateCollector reports the current runtime at scrape time.
type stateCollector struct{ s *Server }

var (
	upDesc       = prometheus.NewDesc("mcp_mux_upstream_up", "1 when the server's last discovery succeeded.", []string{"server"}, nil)
	toolsDesc    = prometheus.NewDesc("mcp_mux_upstream_tools", "Tools the server listed.", []string{"server"}, nil)
	upSessDesc   = prometheus.NewDesc("mcp_mux_upstream_sessions", "Pooled call sessions with the server.", []string{"server"}, nil)
	sessionsDesc = prometheus.NewDesc("mcp_mux_sessions", "Downstream MCP sessions.", nil, nil)
	catalogDesc  = prometheus.NewDesc("mcp_mux_catalog_tools", "Tools in the aggregated catalog.", nil, nil)
)

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{upDesc, toolsDesc, upSessDesc, sessionsDesc, catalogDesc} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	rt := c.s.rt.Load()
	for _, b := range rt.backends {
		up := 1.0
		if b.up.Err() != nil {
			up = 0
		}
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up, b.name)
		ch <- prometheus.MustNewConstMetric(toolsDesc, prometheus.GaugeValue, float64(len(b.up.Tools())), b.name)
		ch <- prometheus.MustNewConstMetric(upSessDesc, prometheus.GaugeValue, float64(b.up.Sessions()), b.name)
	}
	ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(len(c.s.sessions.all())))
	ch <- prometheus.MustNewConstMetric(catalogDesc, prometheus.GaugeValue, float64(len(rt.cat.Load().order)))
}
