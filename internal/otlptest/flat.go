package otlptest

import (
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// Span is one received span. Ids are lowercase hex ("" when absent);
// attribute values are string, bool, int64, float64, []byte, []any or
// map[string]any.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	TraceState                    string
	Name                          string
	Kind                          string // SERVER, CLIENT, INTERNAL, PRODUCER, CONSUMER or UNSPECIFIED
	Attrs                         map[string]any
	Events                        []Event
	Links                         []Link
	Status                        Status
	Resource                      map[string]any // the resource's attributes (service.name, ...)
	Scope                         string         // the instrumentation scope's name
	Start, End                    time.Time
}

// Event is a span event (an exception, say).
type Event struct {
	Name  string
	Time  time.Time
	Attrs map[string]any
}

// Link is a span's link to another span.
type Link struct {
	TraceID, SpanID string
	Attrs           map[string]any
}

// Status is a span's status: Code is UNSET, OK or ERROR.
type Status struct {
	Code, Message string
}

// Service is the span's resource's service.name.
func (s Span) Service() string {
	v, _ := s.Resource["service.name"].(string)
	return v
}

func (s Span) String() string {
	parent := s.ParentSpanID
	if parent == "" {
		parent = "none"
	}
	return fmt.Sprintf("%s %q service=%s trace=%s span=%s parent=%s status=%s links=%d attrs=%s",
		s.Kind, s.Name, s.Service(), s.TraceID, s.SpanID, parent, s.Status.Code, len(s.Links), formatAttrs(s.Attrs))
}

// InTrace returns the spans of trace traceID.
func InTrace(spans []Span, traceID string) []Span {
	var out []Span
	for _, s := range spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// Dump lists spans one a line, for a failing test's message.
func Dump(spans []Span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	return b.String()
}

// Metric is one metric of one export.
type Metric struct {
	Name, Unit, Description string
	Kind                    string // gauge, sum, histogram, exponential_histogram or summary
	Temporality             string // cumulative or delta (sums and histograms)
	Monotonic               bool   // sums
	Points                  []Point
	Resource                map[string]any
	Scope                   string
}

// Point is one data point of a metric.
type Point struct {
	Attrs       map[string]any
	Start, Time time.Time
	Value       float64 // gauges and sums (an int value converted)
	Count       uint64  // histograms and summaries
	Sum         float64 // histograms and summaries
	Bounds      []float64
	Buckets     []uint64 // explicit-bucket histograms: the count in each bucket
	Exemplars   []Exemplar
}

// Exemplar is a measurement kept with a data point, and the span it was
// measured in.
type Exemplar struct {
	TraceID, SpanID string
	Value           float64
	Time            time.Time
	Attrs           map[string]any // the filtered attributes
}

func (m Metric) String() string {
	var pts []string
	for _, p := range m.Points {
		pts = append(pts, fmt.Sprintf("{%s value=%g count=%d sum=%g exemplars=%d}", formatAttrs(p.Attrs), p.Value, p.Count, p.Sum, len(p.Exemplars)))
	}
	return fmt.Sprintf("%s %s (%s) %s", m.Kind, m.Name, m.Unit, strings.Join(pts, " "))
}

// Point returns the metric's first data point whose attributes include
// attrs, and whether there is one.
func (m Metric) Point(attrs map[string]any) (Point, bool) {
	for _, p := range m.Points {
		if includes(p.Attrs, attrs) {
			return p, true
		}
	}
	return Point{}, false
}

func includes(have, want map[string]any) bool {
	for k, v := range want {
		if fmt.Sprint(have[k]) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

func formatAttrs(attrs map[string]any) string {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, attrs[k])
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// flatSpans flattens the spans of an export.
func flatSpans(rss []*tracepb.ResourceSpans) []Span {
	var out []Span
	for _, rs := range rss {
		res := resourceAttrs(rs.GetResource())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				out = append(out, flatSpan(s, res, ss.GetScope().GetName()))
			}
		}
	}
	return out
}

func flatSpan(s *tracepb.Span, res map[string]any, scope string) Span {
	f := Span{
		TraceID:      hexID(s.GetTraceId()),
		SpanID:       hexID(s.GetSpanId()),
		ParentSpanID: hexID(s.GetParentSpanId()),
		TraceState:   s.GetTraceState(),
		Name:         s.GetName(),
		Kind:         strings.TrimPrefix(s.GetKind().String(), "SPAN_KIND_"),
		Attrs:        attrMap(s.GetAttributes()),
		Status: Status{
			Code:    strings.TrimPrefix(s.GetStatus().GetCode().String(), "STATUS_CODE_"),
			Message: s.GetStatus().GetMessage(),
		},
		Resource: res,
		Scope:    scope,
		Start:    unixNano(s.GetStartTimeUnixNano()),
		End:      unixNano(s.GetEndTimeUnixNano()),
	}
	for _, e := range s.GetEvents() {
		f.Events = append(f.Events, Event{Name: e.GetName(), Time: unixNano(e.GetTimeUnixNano()), Attrs: attrMap(e.GetAttributes())})
	}
	for _, l := range s.GetLinks() {
		f.Links = append(f.Links, Link{TraceID: hexID(l.GetTraceId()), SpanID: hexID(l.GetSpanId()), Attrs: attrMap(l.GetAttributes())})
	}
	return f
}

// flatMetrics flattens the metrics of an export and counts their points.
func flatMetrics(rms []*metricspb.ResourceMetrics) ([]Metric, int) {
	var out []Metric
	points := 0
	for _, rm := range rms {
		res := resourceAttrs(rm.GetResource())
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				f := flatMetric(m)
				f.Resource, f.Scope = res, sm.GetScope().GetName()
				points += len(f.Points)
				out = append(out, f)
			}
		}
	}
	return out, points
}

func flatMetric(m *metricspb.Metric) Metric {
	f := Metric{Name: m.GetName(), Unit: m.GetUnit(), Description: m.GetDescription()}
	switch d := m.GetData().(type) {
	case *metricspb.Metric_Gauge:
		f.Kind = "gauge"
		f.Points = numberPoints(d.Gauge.GetDataPoints())
	case *metricspb.Metric_Sum:
		f.Kind, f.Monotonic = "sum", d.Sum.GetIsMonotonic()
		f.Temporality = temporality(d.Sum.GetAggregationTemporality())
		f.Points = numberPoints(d.Sum.GetDataPoints())
	case *metricspb.Metric_Histogram:
		f.Kind = "histogram"
		f.Temporality = temporality(d.Histogram.GetAggregationTemporality())
		for _, p := range d.Histogram.GetDataPoints() {
			f.Points = append(f.Points, Point{
				Attrs: attrMap(p.GetAttributes()), Start: unixNano(p.GetStartTimeUnixNano()), Time: unixNano(p.GetTimeUnixNano()),
				Count: p.GetCount(), Sum: p.GetSum(), Bounds: p.GetExplicitBounds(), Buckets: p.GetBucketCounts(),
				Exemplars: exemplars(p.GetExemplars()),
			})
		}
	case *metricspb.Metric_ExponentialHistogram:
		f.Kind = "exponential_histogram"
		f.Temporality = temporality(d.ExponentialHistogram.GetAggregationTemporality())
		for _, p := range d.ExponentialHistogram.GetDataPoints() {
			f.Points = append(f.Points, Point{
				Attrs: attrMap(p.GetAttributes()), Start: unixNano(p.GetStartTimeUnixNano()), Time: unixNano(p.GetTimeUnixNano()),
				Count: p.GetCount(), Sum: p.GetSum(), Exemplars: exemplars(p.GetExemplars()),
			})
		}
	case *metricspb.Metric_Summary:
		f.Kind = "summary"
		for _, p := range d.Summary.GetDataPoints() {
			f.Points = append(f.Points, Point{
				Attrs: attrMap(p.GetAttributes()), Start: unixNano(p.GetStartTimeUnixNano()), Time: unixNano(p.GetTimeUnixNano()),
				Count: p.GetCount(), Sum: p.GetSum(),
			})
		}
	}
	return f
}

func numberPoints(dps []*metricspb.NumberDataPoint) []Point {
	var out []Point
	for _, p := range dps {
		v := p.GetAsDouble()
		if _, ok := p.GetValue().(*metricspb.NumberDataPoint_AsInt); ok {
			v = float64(p.GetAsInt())
		}
		out = append(out, Point{
			Attrs: attrMap(p.GetAttributes()), Start: unixNano(p.GetStartTimeUnixNano()), Time: unixNano(p.GetTimeUnixNano()),
			Value: v, Exemplars: exemplars(p.GetExemplars()),
		})
	}
	return out
}

func exemplars(es []*metricspb.Exemplar) []Exemplar {
	var out []Exemplar
	for _, e := range es {
		v := e.GetAsDouble()
		if _, ok := e.GetValue().(*metricspb.Exemplar_AsInt); ok {
			v = float64(e.GetAsInt())
		}
		out = append(out, Exemplar{
			TraceID: hexID(e.GetTraceId()), SpanID: hexID(e.GetSpanId()), Value: v,
			Time: unixNano(e.GetTimeUnixNano()), Attrs: attrMap(e.GetFilteredAttributes()),
		})
	}
	return out
}

func temporality(t metricspb.AggregationTemporality) string {
	switch t {
	case metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE:
		return "cumulative"
	case metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA:
		return "delta"
	}
	return ""
}

func resourceAttrs(r *resourcepb.Resource) map[string]any { return attrMap(r.GetAttributes()) }

func attrMap(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = anyValue(kv.GetValue())
	}
	return m
}

func anyValue(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	case *commonpb.AnyValue_ArrayValue:
		out := make([]any, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, anyValue(e))
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		return attrMap(x.KvlistValue.GetValues())
	}
	return nil
}

func hexID(b []byte) string {
	for _, c := range b {
		if c != 0 {
			return hex.EncodeToString(b)
		}
	}
	return ""
}

func unixNano(ns uint64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(ns))
}
