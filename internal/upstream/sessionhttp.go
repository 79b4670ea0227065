package upstream

import (
	"context"
	"io"
	"net/http"
	"sync"
)

// sessionClient returns an HTTP client for one SDK session whose requests
// are all aborted when ctx ends. The SDK sends some requests on contexts of
// its own (notifications/cancelled after a timed-out initialize waits up to
// 5s on a hung server, and Connect waits for it); tying every request to the
// session's context keeps InitTimeout and Close bounded.
func sessionClient(base http.RoundTripper, ctx context.Context) *http.Client {
	return &http.Client{Transport: sessionRT{base: base, ctx: ctx}}
}

type sessionRT struct {
	base http.RoundTripper
	ctx  context.Context
}

func (t sessionRT) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(r.Context())
	unwatch := context.AfterFunc(t.ctx, cancel)
	done := func() { unwatch(); cancel() }
	resp, err := t.base.RoundTrip(r.WithContext(ctx))
	if err != nil {
		done()
		return nil, err
	}
	resp.Body = &sessionBody{ReadCloser: resp.Body, done: done}
	return resp, nil
}

// sessionBody releases the request's context watch when closed.
type sessionBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *sessionBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}
