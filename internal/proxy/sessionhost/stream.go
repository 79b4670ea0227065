package sessionhost

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
)

// StreamOptions are how ServeStream ends a GET stream.
type StreamOptions struct {
	// Stop ends the stream gracefully (shutdown): the client is told to
	// reconnect after Retry, with its Last-Event-ID, to any replica.
	Stop  <-chan struct{}
	Retry time.Duration
	// Sent is called after each event is written (activity).
	Sent func()
}

// ServeStream writes a session's GET stream: a priming event carrying
// the log position f started at, then f's events, each with its log id
// so that a client resumes anywhere with Last-Event-ID. It returns when
// the client goes away, f ends (the session ended, or the client read too
// slowly), or o.Stop closes.
func ServeStream(ctx context.Context, w http.ResponseWriter, f *sessionstore.Follower, o StreamOptions) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(m *sse.Message) bool {
		if _, err := m.WriteTo(w); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// A priming event has an id and empty data, which go-sse leaves out.
	primed := func(extra string) bool {
		if _, err := io.WriteString(w, "id: "+f.Prime()+"\n"+extra+"data: \n\n"); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !primed("") {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.Done():
			// Drain what was delivered before the end.
			for {
				select {
				case e := <-f.Events():
					if !write(event(e)) {
						return
					}
				default:
					return
				}
			}
		case <-o.Stop:
			_ = primed("retry: " + strconv.FormatInt(max(o.Retry, time.Millisecond).Milliseconds(), 10) + "\n")
			return
		case e := <-f.Events():
			if !write(event(e)) {
				return
			}
			if o.Sent != nil {
				o.Sent()
			}
		}
	}
}

var messageType = sse.Type("message")

// event is the SSE message of one log event.
func event(e sessionstore.Event) *sse.Message {
	m := &sse.Message{Type: messageType}
	m.ID, _ = sse.NewID(e.ID)
	m.AppendData(string(e.Data))
	return m
}
