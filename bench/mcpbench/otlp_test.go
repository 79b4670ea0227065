package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestParseVariants(t *testing.T) {
	vs, err := parseVariants("off, 100,1%,0.5,limits,guards")
	if err != nil {
		t.Fatal(err)
	}
	want := []variant{{name: "off"}, {name: "tel100", ratio: 1}, {name: "tel1", ratio: 0.01}, {name: "tel0.5", ratio: 0.005},
		{name: "limits", limits: limitVariants["limits"]}, {name: "guards", guards: guardVariants["guards"]}}
	if len(vs) != len(want) {
		t.Fatalf("got %v, want %v", vs, want)
	}
	for i := range want {
		if vs[i] != want[i] {
			t.Errorf("variant %d: got %v, want %v", i, vs[i], want[i])
		}
	}
	for _, bad := range []string{"0", "101", "on", ""} {
		if _, err := parseVariants(bad); err == nil {
			t.Errorf("parseVariants(%q): no error", bad)
		}
	}
}

// TestOTLPReceiverCountsSpans: the SDK's OTLP/HTTP exporter reaches the
// receiver, which counts the spans by the endpoint's variant prefix.
func TestOTLPReceiverCountsSpans(t *testing.T) {
	srv := httptest.NewServer(otlpHandler())
	defer srv.Close()
	ctx := context.Background()
	for variant, n := range map[string]int{"tel100": 3, "tel1": 1} {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(srv.URL+"/"+variant+"/v1/traces"))
		if err != nil {
			t.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
		for range n {
			_, span := tp.Tracer("test").Start(ctx, "tools/call echo")
			span.End()
		}
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got, err := exportedSpans(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if got["tel100"] != 3 || got["tel1"] != 1 {
		t.Errorf("spans by variant: %v, want tel100:3 tel1:1", got)
	}
}
