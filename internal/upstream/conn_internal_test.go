package upstream

import (
	"context"
	"testing"
)

// A server may reuse a request id once it has its answer: finishing the
// earlier request must not cancel the newer one (a stdio server asking
// "ask-1" on every call did, under load), while the server's own
// cancellation still reaches whichever is current.
func TestServerRequestIDReuse(t *testing.T) {
	var c conn
	ctx1, cancel1 := context.WithCancel(context.Background())
	first := c.trackServerRequest("ask-1", cancel1)
	ctx2, cancel2 := context.WithCancel(context.Background())
	_ = c.trackServerRequest("ask-1", cancel2) // the next call's request, before the first one's goroutine ends
	c.finishServerRequest("ask-1", first)
	if ctx1.Err() == nil {
		t.Fatal("the finished request's context is still live")
	}
	if ctx2.Err() != nil {
		t.Fatal("finishing the earlier request cancelled the newer one with the same id")
	}
	if !c.onRawCancelled("ask-1") || ctx2.Err() == nil {
		t.Fatal("the server's cancellation did not reach the current request")
	}
}
