package telemetry

import (
	"strconv"
	"testing"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// TestAttrSetsBounded: a series' attribute set is built once and kept, up
// to maxSets; past it sets are still right, and not kept.
func TestAttrSetsBounded(t *testing.T) {
	var c attrSets
	k := setKey{method: "tools/call", tool: "web_echo", protocol: "2025-11-25", transport: "tcp"}
	s := c.of(k)
	if v, ok := s.Value(semconv.GenAIToolNameKey); !ok || v.AsString() != "web_echo" || s.Len() != 5 {
		t.Fatalf("set %v", s.ToSlice())
	}
	again := c.of(k)
	if again.Equivalent() != s.Equivalent() || c.n.Load() != 1 {
		t.Fatalf("the same series built twice: %d kept", c.n.Load())
	}
	for i := range maxSets + 10 {
		k.tool = "t" + strconv.Itoa(i)
		got := c.of(k)
		if v, _ := got.Value(semconv.GenAIToolNameKey); v.AsString() != k.tool {
			t.Fatalf("series %d: tool %q", i, v.AsString())
		}
	}
	if n := c.n.Load(); n != maxSets {
		t.Fatalf("%d sets kept, want the bound %d", n, maxSets)
	}
}
