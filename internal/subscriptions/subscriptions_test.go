package subscriptions

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// fakeUpstream counts subscribes and unsubscribes by URI; a subscribe
// blocks while gate is set, until it is closed.
type fakeUpstream struct {
	mu      sync.Mutex
	on, off map[string]int
	gate    chan struct{}
	entered chan struct{}
	fail    error
}

func newFake() *fakeUpstream {
	return &fakeUpstream{on: map[string]int{}, off: map[string]int{}, entered: make(chan struct{}, 16)}
}

func (f *fakeUpstream) Subscribe(ctx context.Context, uri string, on bool) error {
	if on && f.gate != nil {
		f.entered <- struct{}{}
		select {
		case <-f.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		if f.fail != nil {
			return f.fail
		}
		f.on[uri]++
	} else {
		f.off[uri]++
	}
	return nil
}

func (f *fakeUpstream) counts(uri string) (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.on[uri], f.off[uri]
}

func newRegistry() *Registry { return New(Options{UnsubscribeTimeout: time.Second}) }

// Two holders of one URI cost one upstream subscribe; the last to leave
// unsubscribes it once.
func TestOneUpstreamSubscriptionPerURI(t *testing.T) {
	ctx := context.Background()
	r, up := newRegistry(), newFake()
	var a, b Holder
	for _, h := range []*Holder{&a, &b, &a} {
		if err := r.Subscribe(ctx, h, "srv", up, "file:///x"); err != nil {
			t.Fatal(err)
		}
	}
	if on, _ := up.counts("file:///x"); on != 1 || r.Holders("srv", "file:///x") != 2 {
		t.Fatalf("%d subscribes and %d holders, want 1 and 2", on, r.Holders("srv", "file:///x"))
	}
	if err := r.Unsubscribe(ctx, &a, "file:///x"); err != nil {
		t.Fatal(err)
	}
	if _, off := up.counts("file:///x"); off != 0 || !b.Has("file:///x") || a.Has("file:///x") {
		t.Fatalf("after the first holder left: %d unsubscribes", off)
	}
	if err := r.UnsubscribeAll(ctx, &b); err != nil {
		t.Fatal(err)
	}
	if _, off := up.counts("file:///x"); off != 1 || r.Holders("srv", "file:///x") != 0 {
		t.Fatalf("after the last holder left: %d unsubscribes, %d holders", off, r.Holders("srv", "file:///x"))
	}
}

// A URI released while its subscribe is in flight is unsubscribed when
// the subscribe ends, and the waiting holder is told its hold was lost.
func TestReleasedInFlight(t *testing.T) {
	ctx := context.Background()
	r, up := newRegistry(), newFake()
	up.gate = make(chan struct{})
	var h Holder
	errc := make(chan error, 1)
	go func() { errc <- r.Subscribe(ctx, &h, "srv", up, "u") }()
	<-up.entered
	if err := r.Unsubscribe(ctx, &h, "u"); err != nil {
		t.Fatal(err)
	}
	close(up.gate)
	if err := <-errc; !errors.Is(err, errHoldLost) {
		t.Fatalf("Subscribe: %v, want the hold lost", err)
	}
	if on, off := up.counts("u"); on != 1 || off != 1 {
		t.Fatalf("%d subscribes, %d unsubscribes, want 1 and 1", on, off)
	}
}

// A failed subscribe leaves its holder without the URI, and fails the
// holders waiting for it.
func TestFailedSubscribe(t *testing.T) {
	r, up := newRegistry(), newFake()
	up.fail = errors.New("no such resource")
	var h Holder
	if err := r.Subscribe(context.Background(), &h, "srv", up, "u"); err == nil || err.Error() != "no such resource" {
		t.Fatalf("Subscribe: %v", err)
	}
	if h.Has("u") || r.Holders("srv", "u") != 0 {
		t.Fatal("a failed subscribe left a hold")
	}
}

// A holder holds at most MaxPerHolder URIs of at most MaxURI bytes; a
// listen names at most MaxPerHolder.
func TestBounds(t *testing.T) {
	ctx := context.Background()
	r, up := newRegistry(), newFake()
	var h Holder
	for i := range MaxPerHolder {
		h.Mark(strings.Repeat("u", i+1), true)
	}
	err := r.Subscribe(ctx, &h, "srv", up, "one more")
	if !hasMessage(err, -32000, "this session holds 256 resource subscriptions, the most mcp-mux allows per session; unsubscribe from one first") {
		t.Errorf("past the bound: %v", err)
	}
	long := strings.Repeat("x", MaxURI+1)
	if err := r.Subscribe(ctx, &Holder{}, "srv", up, long); !hasMessage(err, -32602, "resource URI of 8193 bytes: mcp-mux subscribes to URIs of at most 8192 bytes") {
		t.Errorf("long URI: %v", err)
	}
	if e := CheckListenURIs(make([]string, MaxPerHolder+1)); e == nil || e.Message != "subscriptions/listen names 257 resource URIs: at most 256 per listen" {
		t.Errorf("listen of 257: %v", e)
	}
	if e := CheckListenURIs([]string{"ok", long}); e == nil || e.Code != -32602 {
		t.Errorf("listen with a long URI: %v", e)
	}
	if e := CheckListenURIs([]string{"ok"}); e != nil {
		t.Errorf("listen within bounds: %v", e)
	}
}

// hasMessage reports whether err is a JSON-RPC error with code and msg.
func hasMessage(err error, code int64, msg string) bool {
	var e *wire.Error
	return errors.As(err, &e) && e.Code == code && e.Message == msg
}

// A zero UnsubscribeTimeout is the default, not an already expired
// unsubscribe; Holders reads without making a table.
func TestOptionsDefaultAndHoldersReadOnly(t *testing.T) {
	ctx := context.Background()
	r := New(Options{})
	if r.opts.UnsubscribeTimeout != DefaultUnsubscribeTimeout {
		t.Fatalf("UnsubscribeTimeout %v, want %v", r.opts.UnsubscribeTimeout, DefaultUnsubscribeTimeout)
	}
	if n := r.Holders("nobody", "file:///x"); n != 0 || len(r.tables) != 0 {
		t.Fatalf("Holders of an unknown server: %d, and %d tables made", n, len(r.tables))
	}
	up := &deadlineUpstream{}
	var h Holder
	if err := r.Subscribe(ctx, &h, "srv", up, "file:///x"); err != nil {
		t.Fatal(err)
	}
	if err := r.Unsubscribe(ctx, &h, "file:///x"); err != nil {
		t.Fatalf("unsubscribe with the default timeout: %v", err)
	}
	if up.left <= 0 {
		t.Fatalf("the unsubscribe had %v left", up.left)
	}
}

// deadlineUpstream records the time an unsubscribe had left, and fails one
// whose context is done.
type deadlineUpstream struct{ left time.Duration }

func (d *deadlineUpstream) Subscribe(ctx context.Context, _ string, on bool) error {
	if !on {
		if dl, ok := ctx.Deadline(); ok {
			d.left = time.Until(dl)
		}
	}
	return ctx.Err()
}
