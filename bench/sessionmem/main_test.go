package main

import (
	"bytes"
	"context"
	"math"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRun runs the benchmark's core small and fast: 20 sessions per run,
// both connection modes, with and without Redis (when redis-server is on
// PATH), and a short idle. It checks that every session initialized and
// answered its call through the mux, that the upstream saw the calls, and
// that figures came out; it asserts no memory figure (a benchmark's numbers
// are never a test's).
func TestRun(t *testing.T) {
	o := defaultOptions()
	o.Sessions, o.Warmup, o.Idle = 20, 2, 100*time.Millisecond
	o.Interval, o.SettleMax = 100*time.Millisecond, 2*time.Second
	o.Conns = []string{"shared", "each"}
	o.Modes = []string{modeLocal}
	if _, err := exec.LookPath("redis-server"); err == nil {
		o.Modes = append(o.Modes, modeRedis)
	} else {
		t.Log("redis-server is not on PATH: local mode only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	results, err := run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(o.Clients)*len(o.Modes)*len(o.Conns) {
		t.Fatalf("%d results, want %d", len(results), len(o.Clients)*len(o.Modes)*len(o.Conns))
	}
	for _, r := range results {
		name := r.Client + "/" + r.Mode + "/" + r.Conns
		if r.Opened != o.Sessions || r.Answered != o.Sessions {
			t.Errorf("%s: %d sessions opened, %d answered after idle; want %d", name, r.Opened, r.Answered, o.Sessions)
		}
		// Every warm-up and measured session called the upstream's echo once.
		if want := int64(o.Warmup + o.Sessions); r.UpstreamCalls != want {
			t.Errorf("%s: the upstream answered %d calls, want %d", name, r.UpstreamCalls, want)
		}
		if r.Before.RSS <= 0 || r.After.RSS <= 0 || r.Idle == nil || r.Idle.RSS <= 0 {
			t.Errorf("%s: no RSS sample: %+v %+v %+v", name, r.Before, r.After, r.Idle)
		}
		if r.Before.HeapInuse <= 0 || r.Before.Goroutines <= 0 {
			t.Errorf("%s: /metrics gave no heap or goroutines: %+v", name, r.Before)
		}
		// Each session holds an SDK session with goroutines of its own.
		if r.PerSession.Goroutines < 1 {
			t.Errorf("%s: %.2f goroutines per session; the sessions are not held open", name, r.PerSession.Goroutines)
		}
		if math.IsNaN(r.PerSession.RSSKiB) || math.IsInf(r.PerSession.RSSKiB, 0) {
			t.Errorf("%s: RSS per session is %v", name, r.PerSession.RSSKiB)
		}
		if (r.Mode == modeRedis) != (r.PerSession.RedisBytes != nil) || (r.Mode == modeRedis && r.After.RedisUsed <= 0) {
			t.Errorf("%s: Redis figures %+v, used_memory %d", name, r.PerSession.RedisBytes, r.After.RedisUsed)
		}
	}
	var out bytes.Buffer
	printTable(&out, o, results)
	for _, want := range []string{"raw    local  shared", "sdk    local  each", "20/20 ok", "20/20 answered"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	t.Log("\n" + out.String())
}

func TestMuxConfig(t *testing.T) {
	if got := string(muxConfig("http://127.0.0.1:1/mcp", nil, 1000)); strings.Contains(got, "store") || strings.Contains(got, "inbound") {
		t.Errorf("local config with 1000 sessions = %s; want neither store nor inbound", got)
	}
	got := string(muxConfig("http://127.0.0.1:1/mcp", &redisServer{addr: "127.0.0.1:2"}, 20000))
	for _, want := range []string{`"redis_url": "redis://127.0.0.1:2"`, `"max_sessions": 20064`, `"type": "http"`} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %s:\n%s", want, got)
		}
	}
}

func TestFromEventStream(t *testing.T) {
	stream := "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\ndata: \"result\":{\"content\":[]}}\n\n"
	r, err := fromEventStream([]byte(stream))
	if err != nil || string(r.ID) != "3" || string(r.Result) != `{"content":[]}` {
		t.Fatalf("fromEventStream = %+v, %v", r, err)
	}
	if _, err := fromEventStream([]byte(": keep-alive\n\n")); err == nil {
		t.Error("a stream without a response was accepted")
	}
}
