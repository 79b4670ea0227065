package storeclient

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Subscription receives what is published on its channels: through one
// go-redis PubSub (classic pub/sub), or on Cluster through one sharded
// PubSub per channel (a sharded subscription lives on the node of its
// channel's slot, and go-redis resubscribes all of a PubSub's channels in
// one command, which must be single-slot), merged. go-redis reconnects
// each and subscribes again; each (re)subscription is received as a
// *redis.Subscription (Confirmed tells). After an error the next receive
// backs off (50 ms doubling to 2 s), so a reader loops without spinning
// while Redis is down.
type Subscription struct {
	one     *redis.PubSub // classic
	backoff backoff       // of one
	many    []*redis.PubSub
	out     chan received
	done    chan struct{} // closed by Close
	stop    context.CancelFunc
	once    sync.Once
	wg      sync.WaitGroup
}

type received struct {
	msg any
	err error
}

// Listen subscribes to channels (classic, or sharded on Cluster); it does
// not wait for Redis.
func (c *Client) Listen(ctx context.Context, channels ...string) *Subscription {
	if !c.Sharded() {
		return &Subscription{one: c.UniversalClient.Subscribe(ctx, channels...)}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Subscription{out: make(chan received, 64), done: make(chan struct{}), stop: cancel}
	for _, ch := range channels {
		ps := c.SSubscribe(ctx, ch)
		s.many = append(s.many, ps)
		s.wg.Go(func() { s.pump(ctx, ps) })
	}
	return s
}

// pump forwards what ps receives until ctx ends.
func (s *Subscription) pump(ctx context.Context, ps *redis.PubSub) {
	var b backoff
	for {
		if !b.wait(ctx) {
			return
		}
		msg, err := ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		b.after(err)
		select {
		case s.out <- received{msg, err}:
		case <-ctx.Done():
			return
		}
	}
}

// backoff is the wait before a receive that follows errors.
type backoff struct{ d time.Duration }

// after records the outcome of a receive.
func (b *backoff) after(err error) {
	switch {
	case err == nil:
		b.d = 0
	case b.d == 0:
		b.d = 50 * time.Millisecond
	default:
		b.d = min(b.d*2, 2*time.Second)
	}
}

// wait waits out the backoff; false when ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	if b.d == 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Receive returns the next message (*redis.Message), subscription
// confirmation (*redis.Subscription) or error, waiting until ctx ends;
// after Close, redis.ErrClosed.
func (s *Subscription) Receive(ctx context.Context) (any, error) {
	if s.one != nil {
		if !s.backoff.wait(ctx) {
			return nil, ctx.Err()
		}
		msg, err := s.one.Receive(ctx)
		s.backoff.after(err)
		return msg, err
	}
	select {
	case r := <-s.out:
		return r.msg, r.err
	case <-s.done:
		return nil, redis.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Confirmed reports whether msg confirms a (re)subscription to a channel,
// classic or sharded, and names the channel.
func Confirmed(msg any) (string, bool) {
	m, ok := msg.(*redis.Subscription)
	if !ok || (m.Kind != "subscribe" && m.Kind != "ssubscribe") {
		return "", false
	}
	return m.Channel, true
}

// Close ends the subscription.
func (s *Subscription) Close() error {
	if s.one != nil {
		return s.one.Close()
	}
	s.stop()
	s.once.Do(func() { close(s.done) })
	var first error
	for _, ps := range s.many {
		if err := ps.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.wg.Wait()
	return first
}
