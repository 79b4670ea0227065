package listenstream

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// On HTTP/1.1 the stream takes the connection over: the handler returns,
// events arrive as chunks, an older version of a key is skipped, and End
// sends the last message and closes the response.
func TestTakenOverStream(t *testing.T) {
	watched := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := &Stream{WriteTimeout: 5 * time.Second}
		if !d.Start(w, r) {
			t.Error("HTTP/1.1: the connection was not taken over")
			return
		}
		go func() {
			defer close(watched)
			d.Notify("notifications/a", map[string]int{"n": 1})
			d.NotifyNewer("t1", 2, "notifications/t", []byte(`{"v":2}`))
			d.NotifyNewer("t1", 1, "notifications/t", []byte(`{"v":1}`))
			d.End([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
			d.Write([]byte(`{"after":"end"}`))
			d.Watch()
		}()
	}))
	defer ts.Close()
	resp, err := http.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/a\",\"params\":{\"n\":1}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/t\",\"params\":{\"v\":2}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
	if string(b) != want {
		t.Errorf("stream:\n%s\nwant:\n%s", b, want)
	}
	select {
	case <-watched:
	case <-time.After(5 * time.Second):
		t.Error("Watch did not return once the stream ended")
	}
}

// Where the connection cannot be taken over, the handler's writer carries
// the events.
func TestHandlerStream(t *testing.T) {
	rec := httptest.NewRecorder()
	d := &Stream{WriteTimeout: time.Second}
	if d.Start(rec, httptest.NewRequest(http.MethodPost, "/mcp", nil)) {
		t.Fatal("a recorder was taken over")
	}
	d.Write([]byte(`{"x":1}`))
	d.End(nil)
	d.Write([]byte(`{"x":2}`))
	sc := bufio.NewScanner(strings.NewReader(rec.Body.String()))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if rec.Code != http.StatusOK || strings.Join(lines, "|") != `event: message|data: {"x":1}|` {
		t.Errorf("HTTP %d, lines %q", rec.Code, lines)
	}
}
