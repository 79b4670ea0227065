package upstream

import (
	"context"
	"sync"
	"time"
)

// background is an Upstream's background work that Close waits for
// (session closes, replies to server requests, notifications/cancelled
// posts). Work that talks to the server bounds itself with ctx, which
// Close ends after at most closeGrace (settle): what is queued when Close
// begins still reaches a live server (the cancellation of calls the
// caller abandoned at shutdown above all: without it the server's handler
// runs on), while a hung server delays Close by no more than the grace,
// where a fixed timeout would hold it for the timeout.
type background struct {
	sync.WaitGroup
	ctx     context.Context    // nil: never cancelled
	stop    context.CancelFunc // ends ctx
	timeout time.Duration      // one exchange's bound; 0: postTimeout
	grace   time.Duration      // settle's bound; 0: closeGrace
}

const (
	postTimeout = 10 * time.Second // one background post to a server that is not closing
	closeGrace  = 2 * time.Second  // what Close lets queued posts take before cutting them short
)

// settle waits, up to the grace, for the work queued so far, then cuts
// what is left short.
func (b *background) settle() {
	done := make(chan struct{})
	go func() { b.Wait(); close(done) }()
	g := b.grace
	if g <= 0 {
		g = closeGrace
	}
	t := time.NewTimer(g)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	if b.stop != nil {
		b.stop()
	}
}

// bound returns the context of one background exchange with the server.
func (b *background) bound() (context.Context, context.CancelFunc) {
	ctx := b.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	d := b.timeout
	if d <= 0 {
		d = postTimeout
	}
	return context.WithTimeout(ctx, d)
}
