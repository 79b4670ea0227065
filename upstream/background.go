package upstream

import (
	"context"
	"sync"
	"time"
)

// background is an Upstream's background work that Close waits for
// (session closes, replies to server requests, notifications/cancelled
// posts). Work that talks to the server bounds itself with ctx, which
// ends when Close begins: a hung server then delays Close by nothing,
// where a fixed timeout would hold it for the timeout.
type background struct {
	sync.WaitGroup
	ctx     context.Context // nil: never cancelled
	timeout time.Duration   // one exchange's bound; 0: postTimeout
}

// postTimeout bounds one background post to a server that is not closing.
const postTimeout = 10 * time.Second

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
