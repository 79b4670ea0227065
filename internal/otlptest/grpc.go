package otlptest

import (
	"context"
	"net"
	"net/http"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // gRPC's gzip decompressor, which exporters may use
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
)

// StartGRPC runs an OTLP/gRPC receiver (insecure, on a loopback port) until
// the test ends.
func StartGRPC(t testing.TB) *Receiver {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("otlptest: %v", err)
	}
	r := newReceiver(ProtocolGRPC)
	r.endpoint = "http://" + lis.Addr().String()
	srv := grpc.NewServer(grpc.StatsHandler(encodings{}))
	coltracepb.RegisterTraceServiceServer(srv, traceService{r: r})
	colmetricspb.RegisterMetricsServiceServer(srv, metricsService{r: r})
	collogspb.RegisterLogsServiceServer(srv, logsService{r: r})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
		r.report(t)
	})
	return r
}

type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s traceService) Export(ctx context.Context, m *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.r.addTraces(grpcRequest(ctx, Traces), m)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

type metricsService struct {
	colmetricspb.UnimplementedMetricsServiceServer
	r *Receiver
}

func (s metricsService) Export(ctx context.Context, m *colmetricspb.ExportMetricsServiceRequest) (*colmetricspb.ExportMetricsServiceResponse, error) {
	s.r.addMetrics(grpcRequest(ctx, Metrics), m)
	return &colmetricspb.ExportMetricsServiceResponse{}, nil
}

type logsService struct {
	collogspb.UnimplementedLogsServiceServer
	r *Receiver
}

func (s logsService) Export(ctx context.Context, m *collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
	s.r.addLogs(grpcRequest(ctx, Logs), m)
	return &collogspb.ExportLogsServiceResponse{}, nil
}

// grpcRequest describes the export of signal that ctx serves.
func grpcRequest(ctx context.Context, signal string) Request {
	q := Request{Signal: signal, Protocol: ProtocolGRPC, Header: http.Header{}}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, vs := range md {
		q.Header[http.CanonicalHeaderKey(k)] = vs
	}
	if enc, ok := ctx.Value(encodingKey{}).(*string); ok {
		q.Encoding = *enc
	}
	return q
}

// encodings is a stats handler that tells an RPC's handler which
// compression its request came in (gRPC keeps grpc-encoding out of the
// metadata).
type encodings struct{}

type encodingKey struct{}

func (encodings) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, encodingKey{}, new(string))
}

func (encodings) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok {
		if enc, ok := ctx.Value(encodingKey{}).(*string); ok {
			*enc = h.Compression
		}
	}
}

func (encodings) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (encodings) HandleConn(context.Context, stats.ConnStats) {}
