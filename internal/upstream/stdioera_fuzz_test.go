package upstream

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"
)

// FuzzStdioProbe feeds arbitrary stdout lines to the server/discover probe:
// it never panics or hangs, and says 2026-07-28 only for an answer to its
// own id that lists that version.
func FuzzStdioProbe(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":"mux-discover","result":{"supportedVersions":["2026-07-28"]}}`))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n{\"jsonrpc\":\"2.0\",\"id\":\"mux-discover\",\"error\":{\"code\":-32601,\"message\":\"no\"}}"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2026-07-28"]}}`))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":"mux-discover","result":{}}]`))
	f.Fuzz(func(t *testing.T, out []byte) {
		lines := make(chan []byte)
		go func() {
			defer close(lines)
			for _, l := range bytes.Split(out, []byte("\n")) {
				if t := bytes.TrimSpace(l); len(t) > 0 && (t[0] == '{' || t[0] == '[') { // as readLines passes them
					lines <- t
				}
			}
		}()
		got, eras := probeStdio(context.Background(), fakeProbed{lines}, stdioProbeTimeout)
		for range lines { // let the sender finish
		}
		if eras.modern && !bytes.Contains(out, []byte(`mux-discover`)) && !bytes.Contains(out, []byte(`\u`)) {
			t.Fatalf("2026-07-28 from an answer to another id: %q", out)
		}
		if got == probeAnswered && !eras.modern && !eras.legacy {
			t.Fatalf("an answer that speaks no era: %q", out)
		}
		if got != probeAnswered && got != probeRestart && got != probeDead {
			t.Fatalf("result %d", got)
		}
	})
}

// fakeProbed feeds the probe lines; its stdin takes anything and its
// unread bytes are unknown.
type fakeProbed struct{ lines chan []byte }

func (fakeProbed) Stdin() io.Writer         { return io.Discard }
func (f fakeProbed) Lines() <-chan []byte   { return f.lines }
func (fakeProbed) StdinUnread() (int, bool) { return 0, false }

func TestProbeBound(t *testing.T) {
	for _, tc := range []struct{ init, probe, want time.Duration }{
		{0, 0, stdioProbeTimeout},
		{60 * time.Second, 0, stdioProbeTimeout},
		{8 * time.Second, 0, 4 * time.Second},
		{8 * time.Second, time.Second, time.Second},
	} {
		if got := probeBound(&Options{InitTimeout: tc.init, ProbeTimeout: tc.probe}); got != tc.want {
			t.Errorf("probeBound(init %s, probe %s) = %s, want %s", tc.init, tc.probe, got, tc.want)
		}
	}
}
