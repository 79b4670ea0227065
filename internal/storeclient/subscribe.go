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
// *redis.Subscription (Confirmed tells).
type Subscription struct {
	one  *redis.PubSub // classic
	many []*redis.PubSub
	out  chan received
	done chan struct{} // closed by Close
	stop context.CancelFunc
	once sync.Once
	wg   sync.WaitGroup
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

// pump forwards what ps receives until ctx ends, backing off after an
// error as a reader of one PubSub would.
func (s *Subscription) pump(ctx context.Context, ps *redis.PubSub) {
	backoff := 50 * time.Millisecond
	for {
		msg, err := ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		select {
		case s.out <- received{msg, err}:
		case <-ctx.Done():
			return
		}
		if err == nil {
			backoff = 50 * time.Millisecond
			continue
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// Receive returns the next message (*redis.Message), subscription
// confirmation (*redis.Subscription) or error, waiting until ctx ends;
// after Close, redis.ErrClosed.
func (s *Subscription) Receive(ctx context.Context) (any, error) {
	if s.one != nil {
		return s.one.Receive(ctx)
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
