package helm

// The Grafana dashboard (mcp-mux/dashboards/mcp-mux.json): the chart renders
// it into a ConfigMap for the Grafana sidecar, and every query in it names a
// series that a running mux's /metrics serves. The served series come from a
// real mux (proxy.New with one go-sdk HTTP upstream and durable tasks on the
// embedded store, a few tool calls made), scraped on its ops handler as
// Prometheus scrapes it, and parsed with the Prometheus text parser. The
// metric names a query uses come from a small PromQL tokenizer
// (metricNames), tested on its own.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// otelPending are the MCP semantic-convention histograms the OpenTelemetry
// Prometheus exporter will serve once the OTel metrics land (issue 21).
// The dashboard shows them in the row otelRow. Until they are served the
// series check skips them, and only them, and only in that row; once the
// mux serves one, TestDashboardSeries fails until it is deleted here (if the
// mux serves them only with an option, give mux in scrapeMux that option).
var otelPending = []string{} // all served: mcp_server_operation_duration_seconds, mcp_client_… and mcp_server_session_…

// otelRow is the dashboard row of the otelPending histograms.
const otelRow = "MCP semantic conventions (OpenTelemetry)"

func dashboardFile() string { return filepath.Join(chartDir(), "dashboards", "mcp-mux.json") }

// grafanaDatasource is a panel's, target's, variable's or annotation's
// data source.
type grafanaDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaPanel struct {
	ID         int                `json:"id"`
	Type       string             `json:"type"`
	Title      string             `json:"title"`
	Datasource *grafanaDatasource `json:"datasource"`
	Targets    []struct {
		Expr       string             `json:"expr"`
		RefID      string             `json:"refId"`
		Datasource *grafanaDatasource `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's
}

// grafanaDashboard is the part of a dashboard's JSON model the tests read.
type grafanaDashboard struct {
	UID           string         `json:"uid"`
	Title         string         `json:"title"`
	SchemaVersion int            `json:"schemaVersion"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string             `json:"name"`
			Type       string             `json:"type"`
			Query      json.RawMessage    `json:"query"`
			Datasource *grafanaDatasource `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []struct {
			Name       string             `json:"name"`
			Expr       string             `json:"expr"`
			Datasource *grafanaDatasource `json:"datasource"`
		} `json:"list"`
	} `json:"annotations"`
}

// dashboardQuery is one PromQL query of the dashboard and where it is.
type dashboardQuery struct {
	where string // `panel "Tool calls" (row "Overview")`, `variable server`, …
	row   string
	expr  string
	ds    *grafanaDatasource
}

func readDashboard(t *testing.T) ([]byte, *grafanaDashboard) {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile())
	if err != nil {
		t.Fatal(err)
	}
	d := &grafanaDashboard{}
	if err := json.Unmarshal(raw, d); err != nil {
		t.Fatalf("%s does not parse: %v", dashboardFile(), err)
	}
	return raw, d
}

// labelValuesRE is Grafana's label_values(query, label) variable query.
var labelValuesRE = regexp.MustCompile(`^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)

// queries lists every PromQL query of d: panel targets (rows' panels
// included), annotations, and the query variables (the query inside
// label_values or query_result).
func (d *grafanaDashboard) queries(t *testing.T) []dashboardQuery {
	t.Helper()
	var qs []dashboardQuery
	var walk func(ps []grafanaPanel, row string)
	walk = func(ps []grafanaPanel, row string) {
		for _, p := range ps {
			if p.Type == "row" {
				row = p.Title
				walk(p.Panels, row)
				continue
			}
			for _, tg := range p.Targets {
				qs = append(qs, dashboardQuery{where: fmt.Sprintf("panel %q (row %q) query %s", p.Title, row, tg.RefID), row: row, expr: tg.Expr, ds: tg.Datasource})
			}
		}
	}
	walk(d.Panels, "")
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			qs = append(qs, dashboardQuery{where: fmt.Sprintf("annotation %q", a.Name), expr: a.Expr, ds: a.Datasource})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var obj struct{ Query string }
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				t.Fatalf("variable %s: query %s is neither a string nor {query}", v.Name, v.Query)
			}
			q = obj.Query
		}
		where := "variable " + v.Name
		if m := labelValuesRE.FindStringSubmatch(q); m != nil {
			q = m[1]
		} else if inner, ok := strings.CutPrefix(strings.TrimSpace(q), "query_result("); ok && strings.HasSuffix(inner, ")") {
			q = strings.TrimSuffix(inner, ")")
		} else {
			t.Errorf("%s: query %q is neither label_values(query, label) nor query_result(query): it names no series", where, q)
			continue
		}
		qs = append(qs, dashboardQuery{where: where, expr: q, ds: v.Datasource})
	}
	return qs
}

// countExprs counts the "expr" keys anywhere in a JSON document.
func countExprs(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if _, ok := e.(string); ok && k == "expr" {
				n++
			}
			n += countExprs(e)
		}
	case []any:
		for _, e := range v {
			n += countExprs(e)
		}
	}
	return n
}

// TestDashboardJSON: the dashboard is one Grafana can import into any
// Prometheus: every panel, target, query variable and annotation uses the
// ${datasource} variable, which is a Prometheus data source picker; panel ids
// are unique; and queries finds every "expr" in the file.
func TestDashboardJSON(t *testing.T) {
	raw, d := readDashboard(t)
	if d.UID != "mcp-mux" || d.Title == "" || d.SchemaVersion < 39 {
		t.Errorf("uid %q, title %q, schemaVersion %d", d.UID, d.Title, d.SchemaVersion)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Name == "datasource" && (v.Type != "datasource" || string(v.Query) != `"prometheus"`) {
			t.Errorf("variable datasource: type %q, query %s; want a prometheus data source picker", v.Type, v.Query)
		}
	}
	for _, name := range []string{"datasource", "namespace", "job", "pod", "server"} {
		if !vars[name] {
			t.Errorf("no variable %s", name)
		}
	}
	isVar := func(ds *grafanaDatasource) bool {
		return ds != nil && ds.Type == "prometheus" && ds.UID == "${datasource}"
	}
	ids := map[int]string{}
	var walk func(ps []grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup || p.ID == 0 {
				t.Errorf("panel %q: id %d (also %q)", p.Title, p.ID, prev)
			}
			ids[p.ID] = p.Title
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if !isVar(p.Datasource) || len(p.Targets) == 0 {
				t.Errorf("panel %q: datasource %+v, %d targets", p.Title, p.Datasource, len(p.Targets))
			}
		}
	}
	walk(d.Panels)
	qs := d.queries(t)
	for _, q := range qs {
		if !isVar(q.ds) {
			t.Errorf("%s: datasource %+v, want {prometheus ${datasource}}", q.where, q.ds)
		}
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	nvars := 0
	for _, q := range qs {
		if strings.HasPrefix(q.where, "variable ") {
			nvars++
		}
	}
	if n := countExprs(doc); n != len(qs)-nvars {
		t.Errorf("the file has %d \"expr\" keys, the panels and annotations %d: a query is where queries does not look", n, len(qs)-nvars)
	}
}

// TestDashboardSeries: every query of the dashboard names at least one
// series, and every series it names is one that /metrics serves, except
// the otelPending ones in their row.
func TestDashboardSeries(t *testing.T) {
	_, d := readDashboard(t)
	fams := scrapeMux(t)
	pending := map[string]bool{}
	checked := 0
	for _, q := range d.queries(t) {
		names, err := metricNames(q.expr)
		if err != nil {
			t.Errorf("%s: %v\n\t%s", q.where, err, q.expr)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s names no series: %s", q.where, q.expr)
		}
		for _, name := range names {
			if fam := pendingFamily(name); fam != "" {
				if q.row != otelRow {
					t.Errorf("%s: %s is not served yet; it belongs in the row %q", q.where, name, otelRow)
				}
				pending[fam] = true
				continue
			}
			if err := served(fams, name); err != nil {
				t.Errorf("%s: %v\n\t%s", q.where, err, q.expr)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Error("no series checked")
	}
	for _, fam := range otelPending {
		if !pending[fam] {
			t.Errorf("otelPending lists %s, which no query of the row %q uses", fam, otelRow)
		}
		if f := fams[fam]; f != nil && len(f.Metric) > 0 {
			t.Errorf("/metrics serves %s now: delete it from otelPending, so the series check covers it", fam)
		}
	}
}

// pendingFamily returns the otelPending family that name (a family name
// or one of a histogram's _bucket, _sum, _count) belongs to, or "".
func pendingFamily(name string) string {
	for _, fam := range otelPending {
		if name == fam || name == fam+"_bucket" || name == fam+"_sum" || name == fam+"_count" {
			return fam
		}
	}
	return ""
}

// served reports whether name is a series fams serve: a counter, gauge,
// untyped or summary family by its own name (a counter's includes _total),
// a histogram's name_bucket, name_sum or name_count, a summary's name_sum
// or name_count. A histogram's bare name is no series.
func served(fams map[string]*dto.MetricFamily, name string) error {
	isHist := func(f *dto.MetricFamily) bool {
		return f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_GAUGE_HISTOGRAM
	}
	if f := fams[name]; f != nil && len(f.Metric) > 0 {
		if isHist(f) {
			return fmt.Errorf("%s is a histogram: its series are %[1]s_bucket, %[1]s_sum and %[1]s_count", name)
		}
		return nil
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		f := fams[base]
		if !ok || f == nil || len(f.Metric) == 0 {
			continue
		}
		if isHist(f) || f.GetType() == dto.MetricType_SUMMARY && suffix != "_bucket" {
			return nil
		}
		return fmt.Errorf("%s is not served: %s is a %s, without %s series", name, base, strings.ToLower(f.GetType().String()), suffix)
	}
	return fmt.Errorf("%s is not served by /metrics", name)
}

// scrapeMux runs a mux with one HTTP upstream and durable tasks on the
// embedded store, makes tool calls through a 2025-11-25 session and ends
// it, then scrapes its ops handler's /metrics (what the chart's
// ServiceMonitor scrapes) and returns the parsed families.
func scrapeMux(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	cfg, err := config.Parse(fmt.Appendf(nil, `{"mcpServers": {"web": {"type": "http", "url": %q}}, "mcp_tasks": {"enabled": true}}`, up.URL+"/mcp"),
		config.LoadOptions{Filename: "test.json"})
	if err != nil {
		t.Fatal(err)
	}
	store, err := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() }) // after the mux's Close (cleanups run last first)
	logs := &mcptest.LogBuffer{}
	mux := proxy.New(proxy.Options{Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}), TaskStore: store})
	if err := mux.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(mux.Handler())
	client := &http.Client{Transport: &http.Transport{}}
	scraped := false // else the mux's log goes to the test log
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = mux.Close(ctx)
		ts.Close()
		client.CloseIdleConnections()
		if !scraped {
			t.Logf("mux log:\n%s", logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mux.WaitDiscovery(ctx); err != nil {
		t.Fatal(err)
	}

	c := mcp.NewClient(&mcp.Implementation{Name: "dashboard-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: client}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct {
		name string
		args map[string]any
	}{{"web_echo", map[string]any{"text": "a"}}, {"web_echo", map[string]any{"text": "b"}}, {"web_add", map[string]any{"a": 1, "b": 2}}, {"web_fail", map[string]any{}}} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: call.name, Arguments: call.args}); err != nil {
			t.Fatalf("%s: %v", call.name, err)
		}
	}
	if err := cs.Close(); err != nil { // a session that ended, for the session histograms
		t.Fatal(err)
	}

	rec := httptest.NewRecorder()
	mux.OpsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	if f := fams["mcp_mux_tool_calls_total"]; f == nil || len(f.Metric) == 0 {
		t.Fatalf("no tool call series after the calls: %v", slices.Sorted(maps.Keys(fams)))
	}
	scraped = true
	return fams
}

// PromQL's functions and aggregation operators: an identifier before "("
// must be one of them (an aggregation may have by/without first).
// Functions are case-sensitive; aggregations and keywords are not.
var (
	promqlAggregations = setOf("sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
		"bottomk", "topk", "quantile", "limitk", "limit_ratio")
	promqlFunctions = setOf("abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh",
		"avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh", "count_over_time",
		"day_of_month", "day_of_week", "day_of_year", "days_in_month", "deg", "delta", "deriv", "double_exponential_smoothing",
		"end", "exp", "floor", "histogram_avg", "histogram_count", "histogram_fraction", "histogram_quantile",
		"histogram_stddev", "histogram_stdvar", "histogram_sum", "holt_winters", "hour", "idelta", "increase",
		"info", "irate", "label_join", "label_replace", "last_over_time", "ln", "log10", "log2", "mad_over_time",
		"max_over_time", "min_over_time", "minute", "month", "predict_linear", "present_over_time", "quantile_over_time",
		"rad", "rate", "resets", "round", "scalar", "sgn", "sin", "sinh", "sort", "sort_by_label", "sort_by_label_desc",
		"sort_desc", "sqrt", "start", "stddev_over_time", "stdvar_over_time", "sum_over_time", "tan", "tanh",
		"time", "timestamp", "vector", "year")
	// Binary operators, modifiers and literals spelled as words (case-insensitive).
	promqlKeywords = setOf("and", "or", "unless", "atan2", "bool", "offset", "inf", "nan")
	// Modifiers followed by a parenthesised list of label names.
	promqlGrouping = setOf("by", "without", "on", "ignoring", "group_left", "group_right")
)

func setOf(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// metricNames returns the metric names a PromQL expression selects, in
// order, each once. It skips what holds no metric name: string literals,
// label matchers ({…}), ranges and subqueries ([…]), Grafana variables
// ($x, ${x}), numbers and durations, comments, keywords, function and
// aggregation names, and the label lists of by, without, on, ignoring,
// group_left and group_right. Every other identifier is a metric name.
func metricNames(expr string) ([]string, error) {
	var names []string
	s := expr
	for i := 0; i < len(s); {
		c := s[i]
		var err error
		switch {
		case c == '"' || c == '\'' || c == '`':
			i, err = skipString(s, i)
		case c == '{':
			i, err = skipGroup(s, i, '{', '}')
		case c == '[':
			i, err = skipGroup(s, i, '[', ']')
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '$':
			i++
			if i < len(s) && s[i] == '{' {
				i, err = skipGroup(s, i, '{', '}')
			} else {
				for i < len(s) && isIdentChar(s[i]) {
					i++
				}
			}
		case isDigit(c) || c == '.' && i+1 < len(s) && isDigit(s[i+1]):
			for i < len(s) && (isIdentChar(s[i]) || s[i] == '.') {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			word, k := s[i:j], j
			for k < len(s) && strings.IndexByte(" \t\r\n", s[k]) >= 0 {
				k++
			}
			next := byte(0)
			if k < len(s) {
				next = s[k]
			}
			switch {
			case promqlGrouping[strings.ToLower(word)]:
				if next != '(' {
					return nil, fmt.Errorf("%s without a label list", word)
				}
				j, err = skipGroup(s, k, '(', ')')
			case promqlKeywords[strings.ToLower(word)], promqlAggregations[strings.ToLower(word)]:
			case next == '(':
				if !promqlFunctions[word] {
					return nil, fmt.Errorf("%s( is no PromQL function", word)
				}
			case !slices.Contains(names, word):
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
		if err != nil {
			return nil, err
		}
	}
	return names, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) }

// skipString returns the index past the string literal at s[i].
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at %d", i)
}

// skipGroup returns the index past the group that opens at s[i], nested
// groups and string literals included.
func skipGroup(s string, i int, open, close byte) (int, error) {
	depth := 0
	for j := i; j < len(s); {
		switch s[j] {
		case '"', '\'', '`':
			var err error
			if j, err = skipString(s, j); err != nil {
				return 0, err
			}
			continue
		case open:
			depth++
		case close:
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		}
		j++
	}
	return 0, fmt.Errorf("%c at %d is never closed", open, i)
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
		err  string
	}{
		{`up`, []string{"up"}, ""},
		{`sum by (server, outcome) (rate(mcp_mux_tool_calls_total{job=~"$job", outcome="error"}[$__rate_interval]))`, []string{"mcp_mux_tool_calls_total"}, ""},
		{`sum(rate(a_total[5m])) by (le) / ignoring(pod) group_left(server) b`, []string{"a_total", "b"}, ""},
		{`histogram_quantile(0.95, sum without (pod) (rate(x_bucket{a="sum(y)"}[1h:5m] offset 5m)))`, []string{"x_bucket"}, ""},
		{`max by (pod) (t{a='b\'c'} > 0) * 1000 and on (pod) time() - c:recorded`, []string{"t", "c:recorded"}, ""},
		{`label_replace(m, "dst", "$1", "src", "(other_metric)") or vector(0) # comment names_nothing`, []string{"m"}, ""},
		{`sum(x) + SUM(x) unless x`, []string{"x"}, ""},
		{`1e3 * 0.5 + .25 + 0x1f + ${var}_not + inf`, []string{"_not"}, ""},
		{`vector(1)`, nil, ""},
		{`rates(x[5m])`, nil, "rates( is no PromQL function"},
		{`sum by server (x)`, nil, "by without a label list"},
		{`x{a="b}`, nil, "unterminated string"},
		{`x{a="b"`, nil, "never closed"},
	} {
		got, err := metricNames(tc.expr)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.expr, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.expr, err)
		case tc.err == "" && !slices.Equal(got, tc.want):
			t.Errorf("%s: %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// TestServed: the family rules of served.
func TestServed(t *testing.T) {
	text := `# TYPE c_total counter
c_total{a="1"} 1
# TYPE g gauge
g 1
# TYPE h histogram
h_bucket{le="+Inf"} 1
h_sum 1
h_count 1
# TYPE s summary
s{quantile="0.5"} 1
s_sum 1
s_count 1
`
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for name, ok := range map[string]bool{
		"c_total": true, "c": false, "c_total_count": false, "g": true, "g_bucket": false,
		"h_bucket": true, "h_sum": true, "h_count": true, "h": false, "h_total": false,
		"s": true, "s_sum": true, "s_count": true, "s_bucket": false, "nope": false,
	} {
		if err := served(fams, name); (err == nil) != ok {
			t.Errorf("served(%s) = %v, want ok %v", name, err, ok)
		}
	}
}

// TestDashboardConfigMap: dashboard.enabled renders the committed JSON
// unchanged into a ConfigMap with the sidecar's label (quoted, as a label
// value must be) and the given annotations, in either mode and from an
// agent's chart that depends on this one; by default nothing is rendered.
func TestDashboardConfigMap(t *testing.T) {
	raw, _ := readDashboard(t)
	remote := map[string]any{"inbound": map[string]any{"auth": map[string]any{"mode": "none", "allow_remote": true}}}
	dashboardOf := func(o *objects) []*corev1.ConfigMap {
		var out []*corev1.ConfigMap
		for _, cm := range o.configMaps {
			if strings.HasSuffix(cm.Name, "-dashboard") {
				out = append(out, cm)
			}
		}
		return out
	}

	t.Run("off by default", func(t *testing.T) {
		for _, values := range []map[string]any{{"config": remote}, {"mode": "sidecar"}, {"config": remote, "dashboard": map[string]any{"enabled": false}}} {
			out, err := render(t, chartDir(), values)
			if err != nil {
				t.Fatal(err)
			}
			if got := dashboardOf(decode(t, out)); len(got) != 0 || strings.Contains(out, "grafana_dashboard") {
				t.Errorf("values %v rendered a dashboard: %v", values, got)
			}
		}
	})

	check := func(t *testing.T, out string, wantLabels, wantAnnotations map[string]string) {
		t.Helper()
		cms := dashboardOf(decode(t, out))
		if len(cms) != 1 {
			t.Fatalf("%d dashboard ConfigMaps", len(cms))
		}
		cm := cms[0]
		for k, v := range wantLabels {
			if cm.Labels[k] != v {
				t.Errorf("label %s = %q, want %q (labels %v)", k, cm.Labels[k], v, cm.Labels)
			}
		}
		for k, v := range wantAnnotations {
			if cm.Annotations[k] != v {
				t.Errorf("annotation %s = %q, want %q (annotations %v)", k, cm.Annotations[k], v, cm.Annotations)
			}
		}
		got, ok := cm.Data["mcp-mux.json"]
		if !ok || len(cm.Data) != 1 {
			t.Fatalf("data keys %v, want mcp-mux.json", slices.Sorted(maps.Keys(cm.Data)))
		}
		if got != strings.TrimRight(string(raw), "\n") {
			t.Errorf("the rendered dashboard differs from %s", dashboardFile())
		}
		var d grafanaDashboard
		if err := json.Unmarshal([]byte(got), &d); err != nil || d.UID != "mcp-mux" || len(d.Panels) == 0 {
			t.Errorf("the rendered dashboard: %v, uid %q, %d panels", err, d.UID, len(d.Panels))
		}
	}

	t.Run("deployment", func(t *testing.T) {
		out, err := render(t, chartDir(), map[string]any{"config": remote, "dashboard": map[string]any{
			"enabled":     true,
			"labels":      map[string]any{"team": "agents", "release_id": 7},
			"annotations": map[string]any{"grafana_folder": "MCP"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		check(t, out, map[string]string{"grafana_dashboard": "1", "team": "agents", "release_id": "7", "app.kubernetes.io/name": "mcp-mux"},
			map[string]string{"grafana_folder": "MCP"})
	})

	t.Run("sidecar label replaced", func(t *testing.T) {
		out, err := render(t, chartDir(), map[string]any{"mode": "sidecar", "dashboard": map[string]any{
			"enabled": true, "labels": map[string]any{"grafana_dashboard": nil, "my_dashboards": "yes"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		check(t, out, map[string]string{"my_dashboards": "yes"}, nil)
		if strings.Contains(out, "grafana_dashboard") {
			t.Error("the null label was rendered")
		}
	})

	t.Run("agent chart", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "agent")
		copyDir(t, filepath.Join("testdata", "agent"), dir)
		copyDir(t, chartDir(), filepath.Join(dir, "charts", "mcp-mux"))
		out, err := render(t, dir, map[string]any{"mcp-mux": map[string]any{"dashboard": map[string]any{"enabled": true}}})
		if err != nil {
			t.Fatal(err)
		}
		check(t, out, map[string]string{"grafana_dashboard": "1"}, nil)
	})
}
