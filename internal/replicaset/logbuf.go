package replicaset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"time"
)

// logBuf is a concurrency-safe buffer that wakes waiters on every write.
type logBuf struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newLogBuf() *logBuf { return &logBuf{changed: make(chan struct{})} }

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.changed)
	b.changed = make(chan struct{})
	return b.buf.Write(p)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor blocks until pred holds for the buffer's contents, done is
// closed, or the timeout passes; it returns pred's last result.
func (b *logBuf) waitFor(timeout time.Duration, done <-chan struct{}, pred func(string) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		s, changed := b.buf.String(), b.changed
		b.mu.Unlock()
		if pred(s) {
			return true
		}
		select {
		case <-changed:
		case <-done:
			return pred(b.String())
		case <-deadline.C:
			return false
		}
	}
}

// logLines decodes the JSON log lines in s, skipping anything else.
func logLines(s string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// findLogs returns the JSON log lines with the given message.
func findLogs(s, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range logLines(s) {
		if l["@message"] == msg {
			out = append(out, l)
		}
	}
	return out
}
