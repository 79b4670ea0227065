package listenstream

import (
	"sync"
	"time"
)

// KeepAlive is a Keeper's default interval.
const KeepAlive = 15 * time.Second

// pingTimeout bounds a keep-alive write: a stream whose client has not
// read for long enough to fill the connection's buffers is gone.
const pingTimeout = time.Second

// Keeper watches streams taken over with one goroutine for all of them,
// instead of one reading each connection: every interval it writes an SSE
// comment on each (clients ignore it; proxies see an idle stream is alive)
// and a stream whose write fails — its client reset the connection after
// the previous one, or stopped reading — is gone: its gone func runs. A
// client's departure is found within two intervals, or at the next event
// written. A stream busy writing an event is skipped that round.
type Keeper struct {
	interval time.Duration

	mu      sync.Mutex
	streams map[*Stream]func()
	stop    chan struct{}
	done    chan struct{}
}

// NewKeeper starts a keeper writing every interval (KeepAlive when 0).
func NewKeeper(interval time.Duration) *Keeper {
	if interval <= 0 {
		interval = KeepAlive
	}
	k := &Keeper{interval: interval, streams: map[*Stream]func(){}, stop: make(chan struct{}), done: make(chan struct{})}
	go k.run()
	return k
}

// Keep watches d, taken over, until forget is called; gone runs (once, on
// the keeper's goroutine) when d's client is found gone. It reports false,
// watching nothing, once the keeper is closed.
func (k *Keeper) Keep(d *Stream, gone func()) (forget func(), ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	select {
	case <-k.stop:
		return func() {}, false
	default:
	}
	k.streams[d] = gone
	return func() {
		k.mu.Lock()
		delete(k.streams, d)
		k.mu.Unlock()
	}, true
}

// Len is how many streams the keeper watches.
func (k *Keeper) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.streams)
}

// Close stops the keeper; the streams it watched are left as they are.
func (k *Keeper) Close() {
	k.mu.Lock()
	select {
	case <-k.stop:
	default:
		close(k.stop)
	}
	k.mu.Unlock()
	<-k.done
}

func (k *Keeper) run() {
	defer close(k.done)
	t := time.NewTicker(k.interval)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
			k.ping()
		}
	}
}

// ping writes the keep-alive on every stream, and runs the gone func of
// those whose write failed (outside the lock: it forgets its stream).
func (k *Keeper) ping() {
	k.mu.Lock()
	streams := make([]*Stream, 0, len(k.streams))
	for d := range k.streams {
		streams = append(streams, d)
	}
	k.mu.Unlock()
	for _, d := range streams {
		if d.ping() {
			continue
		}
		k.mu.Lock()
		gone, ok := k.streams[d]
		delete(k.streams, d)
		k.mu.Unlock()
		if ok {
			gone()
		}
	}
}

// keepAlive is the SSE comment a Keeper writes.
var keepAlive = []byte(":\n\n")

// ping writes the keep-alive unless a write is in progress; it reports
// false once the stream is closed.
func (d *Stream) ping() bool {
	if !d.mu.TryLock() {
		return true // an event is being written
	}
	defer d.mu.Unlock()
	if !d.closed && d.conn != nil {
		timeout := d.WriteTimeout
		if timeout <= 0 || timeout > pingTimeout {
			d.WriteTimeout = pingTimeout
		}
		d.writeRaw(nil, keepAlive, nil)
		d.WriteTimeout = timeout
	}
	return !d.closed
}
