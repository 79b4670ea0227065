package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDropMeta(t *testing.T) {
	drop := func(k string) bool { return strings.HasPrefix(k, "io.x/") }
	for _, c := range []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`},
		{`{"_meta":{"io.x/v":1},"a":1}`, `{"a":1}`},
		{`{"_meta":{"io.x/v":1,"k":2},"a":1}`, `{"_meta":{"k":2},"a":1}`},
		{`{"_meta":{"k":"io.x/"}, "a":1}`, `{"_meta":{"k":"io.x/"}, "a":1}`}, // nothing dropped: as it was
		{`{"a":"io.x/"}`, `{"a":"io.x/"}`},
		{`{"_meta":"io.x/"}`, `{"_meta":"io.x/"}`},
		{`["io.x/"]`, `["io.x/"]`},
	} {
		if got := string(DropMeta(json.RawMessage(c.in), "io.x/", drop)); got != c.want {
			t.Errorf("DropMeta(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

// FuzzDropMeta: upstream notification params never crash it, and no
// dropped key survives in an object's _meta.
func FuzzDropMeta(f *testing.F) {
	for _, s := range []string{`{"_meta":{"io.x/v":1,"k":2}}`, `{"_meta":null,"io.x/":1}`, `[1]`, `{"_meta":{"io.x/a":{"_meta":{}}}}`} {
		f.Add([]byte(s))
	}
	drop := func(k string) bool { return strings.HasPrefix(k, "io.x/") }
	f.Fuzz(func(t *testing.T, data []byte) {
		out := DropMeta(data, "io.x/", drop)
		var in map[string]json.RawMessage
		var inMeta map[string]json.RawMessage
		if json.Unmarshal(data, &in) != nil || json.Unmarshal(in["_meta"], &inMeta) != nil {
			return // not an object with an object _meta: returned as it is
		}
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if err := json.Unmarshal(out, &p); err != nil {
			t.Fatalf("%s became %s: %v", data, out, err)
		}
		for k := range p.Meta {
			if drop(k) {
				t.Fatalf("%s kept %q: %s", data, k, out)
			}
		}
	})
}

func TestSetMeta(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"name":"x"}`, `{"_meta":{"traceparent":"00-a-b-01"},"name":"x"}`},
		{`{"name":"x","_meta":{"traceparent":"old","progressToken":7,"tracestate":"s","Baggage":"b"}}`, `{"_meta":{"progressToken":7,"traceparent":"00-a-b-01"},"name":"x"}`},
		{``, `{"_meta":{"traceparent":"00-a-b-01"}}`},
		{`{"_meta":"nope"}`, `{"_meta":{"traceparent":"00-a-b-01"}}`},
	} {
		drop := func(k string) bool {
			return strings.EqualFold(k, "traceparent") || strings.EqualFold(k, "tracestate") || strings.EqualFold(k, "baggage")
		}
		got := string(SetMeta(json.RawMessage(tc.in), map[string]string{"traceparent": "00-a-b-01"}, drop))
		if got != tc.want {
			t.Errorf("SetMeta(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
