package otlptest

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// maxBody bounds an export's body, compressed or not.
const maxBody = 64 << 20

// contentTypes maps the content types of exports to their protocols.
var contentTypes = map[string]string{
	"application/x-protobuf": ProtocolHTTP,
	"application/protobuf":   ProtocolHTTP,
	"application/json":       ProtocolJSON,
}

// Start runs an OTLP/HTTP receiver until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := newReceiver(ProtocolHTTP)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP(Traces))
	mux.HandleFunc("POST /v1/metrics", r.serveHTTP(Metrics))
	mux.HandleFunc("POST /v1/logs", r.serveHTTP(Logs))
	srv := httptest.NewServer(mux)
	r.endpoint = srv.URL
	t.Cleanup(func() {
		srv.Close()
		r.report(t)
	})
	return r
}

// serveHTTP answers the exports of signal.
func (r *Receiver) serveHTTP(signal string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
		protocol := contentTypes[ct]
		if protocol == "" {
			http.Error(w, "unsupported content type "+ct, http.StatusUnsupportedMediaType)
			return
		}
		enc := req.Header.Get("Content-Encoding")
		body, err := readBody(req.Body, enc)
		if err != nil {
			// A body cut short (an exporter shut down mid-export) is not
			// the exporter's encoding mistake; a bad gzip stream is.
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				r.fail(fmt.Errorf("%s: %w", signal, err))
			}
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if protocol == ProtocolJSON {
			if body, err = hexIDsToBase64(body); err != nil {
				r.fail(fmt.Errorf("%s: %w", signal, err))
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		unmarshal := func(b []byte, m proto.Message) error { return proto.Unmarshal(b, m) }
		if protocol == ProtocolJSON {
			unmarshal = func(b []byte, m proto.Message) error { return protojson.Unmarshal(b, m) }
		}
		q := Request{Signal: signal, Protocol: protocol, Encoding: enc, Header: req.Header.Clone()}
		resp, err := r.export(q, body, unmarshal)
		if err != nil {
			r.fail(fmt.Errorf("%s (%s): %w", signal, protocol, err))
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, _ := proto.Marshal(resp)
		if protocol == ProtocolJSON {
			out, _ = protojson.Marshal(resp)
		}
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write(out)
	}
}

// export decodes body as an export of q.Signal, records it, and returns
// the response.
func (r *Receiver) export(q Request, body []byte, unmarshal func([]byte, proto.Message) error) (proto.Message, error) {
	switch q.Signal {
	case Traces:
		m := &coltracepb.ExportTraceServiceRequest{}
		if err := unmarshal(body, m); err != nil {
			return nil, err
		}
		r.addTraces(q, m)
		return &coltracepb.ExportTraceServiceResponse{}, nil
	case Metrics:
		m := &colmetricspb.ExportMetricsServiceRequest{}
		if err := unmarshal(body, m); err != nil {
			return nil, err
		}
		r.addMetrics(q, m)
		return &colmetricspb.ExportMetricsServiceResponse{}, nil
	default:
		m := &collogspb.ExportLogsServiceRequest{}
		if err := unmarshal(body, m); err != nil {
			return nil, err
		}
		r.addLogs(q, m)
		return &collogspb.ExportLogsServiceResponse{}, nil
	}
}

func (r *Receiver) addTraces(q Request, m *coltracepb.ExportTraceServiceRequest) {
	spans := flatSpans(m.GetResourceSpans())
	q.Items = len(spans)
	r.add(q, spans, nil)
}

func (r *Receiver) addMetrics(q Request, m *colmetricspb.ExportMetricsServiceRequest) {
	metrics, points := flatMetrics(m.GetResourceMetrics())
	q.Items = points
	r.add(q, nil, metrics)
}

func (r *Receiver) addLogs(q Request, m *collogspb.ExportLogsServiceRequest) {
	for _, rl := range m.GetResourceLogs() {
		for _, sl := range rl.GetScopeLogs() {
			q.Items += len(sl.GetLogRecords())
		}
	}
	r.add(q, nil, nil)
}

// readBody reads an export's body in its Content-Encoding.
func readBody(body io.Reader, encoding string) ([]byte, error) {
	body = io.LimitReader(body, maxBody)
	switch encoding {
	case "":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		body = io.LimitReader(zr, maxBody)
	default:
		return nil, fmt.Errorf("unsupported content encoding %q", encoding)
	}
	return io.ReadAll(body)
}

// hexIDsToBase64 rewrites OTLP/JSON, whose trace and span ids are hex
// strings, into the protobuf JSON mapping protojson reads, where bytes are
// base64.
func hexIDsToBase64(body []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if err := rewriteIDs(v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// idFields are the OTLP fields that hold trace or span ids, in both of the
// spellings protojson accepts.
var idFields = map[string]bool{
	"traceId": true, "spanId": true, "parentSpanId": true,
	"trace_id": true, "span_id": true, "parent_span_id": true,
}

func rewriteIDs(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && idFields[k] {
				b, err := hex.DecodeString(s)
				if err != nil {
					return fmt.Errorf("%s %q is not hex: %w", k, s, err)
				}
				x[k] = base64.StdEncoding.EncodeToString(b)
				continue
			}
			if err := rewriteIDs(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := rewriteIDs(e); err != nil {
				return err
			}
		}
	}
	return nil
}
