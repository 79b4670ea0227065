package taskpoll

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the task runtime's Prometheus series.
type metrics struct {
	polls, pollErrors, takeovers, storeErrors, discarded, refused, swept prometheus.Counter
}

var tasksDesc = prometheus.NewDesc("mcp_mux_tasks", "Durable MCP tasks in the store, by status (all replicas).", []string{"status"}, nil)

func newMetrics(s *Service, reg prometheus.Registerer) (*metrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &metrics{
		polls:       c("mcp_mux_task_polls_total", "Status tool calls this replica's poller made."),
		pollErrors:  c("mcp_mux_task_poll_errors_total", "Polls that failed: transient errors (retried with backoff) and protocol errors (the task failed)."),
		takeovers:   c("mcp_mux_task_lease_takeovers_total", "Tasks this replica claimed after another lease expired unreleased."),
		storeErrors: c("mcp_mux_task_store_errors_total", "Task store operations that failed."),
		discarded:   c("mcp_mux_task_results_discarded_total", "Poll results discarded because their lease had expired or was superseded."),
		refused:     c("mcp_mux_task_submits_refused_total", "Submits refused because the caller had mcp_tasks.max_active_tasks_per_user active tasks."),
		swept:       c("mcp_mux_task_records_expired_total", "Terminal task records this replica removed after mcp_tasks.retention_seconds."),
	}
	if reg == nil {
		return m, nil
	}
	for _, col := range []prometheus.Collector{m.polls, m.pollErrors, m.takeovers, m.storeErrors, m.discarded, m.refused, m.swept, countsCollector{s}} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// countsCollector reads the status counts at scrape time.
type countsCollector struct{ s *Service }

func (c countsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- tasksDesc }

func (c countsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.s.Counts(ctx)
	if err != nil {
		return
	}
	for _, st := range Statuses {
		ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}
