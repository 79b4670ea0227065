package sessionhost

import (
	"bytes"
	"cmp"
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/mcp-mux/mcp-mux/internal/listenstream"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
)

// StreamOptions are how ServeStream runs and ends a GET stream.
type StreamOptions struct {
	// Stop ends the stream gracefully when done (shutdown): the client is
	// told to reconnect after Retry, with its Last-Event-ID, to any replica.
	Stop  context.Context
	Retry time.Duration
	// Sent is called after each event is written (activity).
	Sent func()
	// WriteTimeout bounds each write on a connection taken over; default
	// 10 s.
	WriteTimeout time.Duration
	// Keeper watches a stream taken over for its client leaving (no
	// goroutine per stream); nil: a goroutine reading the connection.
	Keeper *listenstream.Keeper
	// Go runs the end of a stream taken over (o.Ended) once it finished,
	// reporting false when it will not (a goroutine then); nil: a
	// goroutine.
	Go func(func()) bool
	// Ended is called once the stream ended, from any goroutine.
	Ended func()
}

// defaultWriteTimeout is StreamOptions.WriteTimeout's default.
const defaultWriteTimeout = 10 * time.Second

// ServeStream writes a session's GET stream: a priming event carrying the
// log position f started at, then f's events, each with its log id so
// that a client resumes anywhere with Last-Event-ID. The stream ends when
// the client goes away, f ends (the session ended, or the client read too
// slowly) or o.Stop is done; then o.Ended runs.
//
// An idle GET stream is held by most clients for a session's life, so on
// HTTP/1.1 it is a listenstream.Stream: the connection is taken over after
// the headers, ServeStream returns at once and net/http's goroutines and
// buffers go; what stays is the connection and f (no buffer while idle),
// and o.Keeper's one goroutine for all streams finds the client gone (a
// keep-alive write fails). Events are written by a goroutine started when
// f has some and gone once they are written. Where the connection cannot be taken over (HTTP/2,
// HTTP/1.0), ServeStream returns when the stream ends.
func ServeStream(w http.ResponseWriter, r *http.Request, f *sessionstore.Follower, o StreamOptions) {
	s := &follow{f: f, o: o, ended: make(chan struct{}),
		d: &listenstream.Stream{WriteTimeout: cmp.Or(o.WriteTimeout, defaultWriteTimeout)}}
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	taken := s.d.Start(w, r)
	if !s.d.WriteEvent(primeEvent(f.Prime(), "")) {
		s.finish()
	}
	f.Notify(s.kick)
	s.kick() // what the replay queued
	stop := context.AfterFunc(cmp.Or(o.Stop, context.Background()), s.stop)
	s.unwatch = stop
	if taken {
		if o.Keeper == nil {
			go func() {
				s.d.Watch()
				s.end()
			}()
			return
		}
		forget, ok := o.Keeper.Keep(s.d, s.end)
		s.mu.Lock()
		s.taken, s.forget = true, forget
		done := s.finished
		s.mu.Unlock()
		switch {
		case !ok:
			s.stop() // the keeper is closed: shutting down
		case done: // ended before the keeper had it
		default:
			return
		}
	} else {
		select {
		case <-r.Context().Done():
		case <-s.ended:
		}
	}
	s.end()
}

// follow is one GET stream: f's events written on d.
type follow struct {
	d       *listenstream.Stream
	f       *sessionstore.Follower
	o       StreamOptions
	running atomic.Bool // a drain runs or is starting

	mu       sync.Mutex // orders the writers: drain, stop
	ended    chan struct{}
	finished bool
	taken    bool   // kept by a Keeper: finishing the stream ends it
	forget   func() // takes the stream from its keeper
	unwatch  func() bool
	once     sync.Once
}

// kick starts a drain unless one runs: f has events, or ended. It never
// blocks (f's Notify).
func (s *follow) kick() {
	if s.running.CompareAndSwap(false, true) {
		go s.drain()
	}
}

// drain writes what f has, then ends the stream if f ended; it returns
// when there is nothing left to do, and keeps no goroutine while idle.
func (s *follow) drain() {
	for {
		s.mu.Lock()
		s.flushLocked()
		s.mu.Unlock()
		s.running.Store(false)
		if !s.due() || !s.running.CompareAndSwap(false, true) {
			return
		}
	}
}

// due reports whether f has events to write or ended with the stream
// still open.
func (s *follow) due() bool {
	select {
	case <-s.f.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.finished
	default:
	}
	return s.f.Len() > 0
}

// flushLocked writes f's queued events, and ends the stream when f ended
// (after what it delivered before). Called with s.mu held.
func (s *follow) flushLocked() {
	for !s.finished {
		e, ok := s.f.Next()
		if !ok {
			break
		}
		if !s.d.WriteEvent(event(e)) {
			s.finishLocked()
			return
		}
		if s.o.Sent != nil {
			s.o.Sent()
		}
	}
	select {
	case <-s.f.Done():
		if s.f.Len() == 0 { // else an event came in between: the next drain writes it
			s.finishLocked()
		}
	default:
	}
}

// stop ends the stream for a drain: what f has is written, then a
// priming event asking the client to come back after Retry.
func (s *follow) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
	if !s.finished {
		retry := strconv.FormatInt(max(s.o.Retry, time.Millisecond).Milliseconds(), 10)
		s.d.WriteEvent(primeEvent(s.f.Prime(), "retry: "+retry+"\n"))
		s.finishLocked()
	}
}

// finish ends the stream: no write follows, a connection taken over
// closes (its watcher then calls end).
func (s *follow) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishLocked()
}

func (s *follow) finishLocked() {
	if !s.finished {
		s.finished = true
		s.d.End(nil)
		close(s.ended)
		if s.taken && s.forget != nil { // no watcher will: end outside s.mu
			if s.o.Go == nil || !s.o.Go(s.end) {
				go s.end()
			}
		}
	}
}

// end runs once the stream is over: f is closed, the keeper forgets it and
// o.Ended runs.
func (s *follow) end() {
	s.once.Do(func() {
		s.finish()
		s.unwatch()
		s.mu.Lock()
		forget := s.forget
		s.mu.Unlock()
		if forget != nil {
			forget()
		}
		s.f.Close()
		if s.o.Ended != nil {
			s.o.Ended()
		}
	})
}

// primeEvent is a priming event: an id and empty data (extra, e.g. a retry
// line, between them).
func primeEvent(id, extra string) []byte {
	return []byte("id: " + id + "\n" + extra + "data: \n\n")
}

var messageType = sse.Type("message")

// event is the SSE message of one log event.
func event(e sessionstore.Event) []byte {
	m := &sse.Message{Type: messageType}
	m.ID, _ = sse.NewID(e.ID)
	m.AppendData(string(e.Data))
	var b bytes.Buffer
	_, _ = m.WriteTo(&b)
	return b.Bytes()
}
