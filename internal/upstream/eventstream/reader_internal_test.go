package eventstream

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestEventReader(t *testing.T) {
	in := ": comment\r\nid: e1\nretry: 500\ndata: \n\n" + // priming event: no data
		"event: message\nid: e2\ndata: {\"a\":\ndata: 1}\n\n" +
		"data:x\nid: bad\x00id\n\n" +
		"retry: soon\ndata: cut off"
	r := NewReader(strings.NewReader(in), 1024)
	got, err := r.Next()
	if err != nil || string(got) != `{"a":`+"\n"+`1}` || r.lastID != "e2" || r.retry != 500*time.Millisecond {
		t.Fatalf("first event = %q, %v (id %q, retry %s)", got, err, r.lastID, r.retry)
	}
	got, err = r.Next()
	if err != nil || string(got) != "x" || r.lastID != "e2" {
		t.Fatalf("second event = %q, %v (id %q): an id with NUL must be ignored", got, err, r.lastID)
	}
	if got, err = r.Next(); !errors.Is(err, io.EOF) || r.retry != 500*time.Millisecond {
		t.Fatalf("an event cut off by the end = %q, %v (retry %s)", got, err, r.retry)
	}
}

func TestEventReaderBounds(t *testing.T) {
	for _, in := range []string{
		"data: " + strings.Repeat("x", 5000) + "\n\n",                     // one long line
		strings.Repeat("data: "+strings.Repeat("y", 100)+"\n", 60) + "\n", // many lines
	} {
		r := NewReader(strings.NewReader(in), 4096)
		if _, err := r.Next(); !errors.Is(err, ErrTooLarge) {
			t.Errorf("event of %d bytes: err = %v, want ErrTooLarge", len(in), err)
		}
	}
}

// FuzzEventReader: any stream ends in events within the bound or an error,
// never a panic or an oversized event.
func FuzzEventReader(f *testing.F) {
	f.Add("id: 1\nretry: 10\ndata: {}\n\n")
	f.Add("data: a\r\ndata: b\r\n\r\n:c\n")
	f.Add("retry: 99999999999999\nid\ndata\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		r := NewReader(strings.NewReader(in), 256)
		for range 1000 {
			data, err := r.Next()
			if err != nil {
				return
			}
			if len(data) > 256 {
				t.Fatalf("event of %d bytes past the bound", len(data))
			}
		}
	})
}
