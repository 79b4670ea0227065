package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	defaultBuffer       = 4096
	defaultMaxFileBytes = 100 << 20
)

// writer writes records as JSON lines on a goroutine of its own, so a
// request only queues its record; a full queue drops it (counted).
type writer struct {
	queue   chan Record
	done    chan struct{}
	mu      sync.RWMutex // closed and sending on queue
	closed  bool
	out     io.Writer
	file    *os.File // nil for stderr, stdout
	path    string
	size    int64
	max     int64
	log     hclog.Logger
	written prometheus.Counter
	dropped prometheus.Counter
	err     error // the first write error, reported once
}

// newWriter opens o's output and starts writing.
func newWriter(o Options) (*writer, error) {
	w := &writer{queue: make(chan Record, cmp(o.Buffer, defaultBuffer)), done: make(chan struct{}), log: o.Log, max: int64(cmp(int(o.MaxFileBytes), defaultMaxFileBytes)),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "mcp_mux_audit_records_total", Help: "Audit records written."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "mcp_mux_audit_records_dropped_total", Help: "Audit records dropped: the writer fell behind (a full queue) or its output failed."}),
	}
	switch o.Output {
	case "", "stderr":
		w.out = os.Stderr
	case "stdout":
		w.out = os.Stdout
	default:
		if !filepath.IsAbs(o.Output) {
			return nil, fmt.Errorf("audit: output %q must be stderr, stdout or an absolute file path", o.Output)
		}
		w.path = o.Output
		if err := w.open(); err != nil {
			return nil, err
		}
	}
	go w.run()
	return w, nil
}

// cmp is v, or def when v is not positive.
func cmp(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// open opens (creating, appending) the file output, owner-only.
func (w *writer) open() error {
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit: opening the output file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("audit: opening the output file: %w", err)
	}
	w.file, w.out, w.size = f, f, st.Size()
	return nil
}

// put queues r, or drops it when the queue is full.
func (w *writer) put(r Record) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.dropped.Inc()
		return
	}
	select {
	case w.queue <- r:
	default:
		w.dropped.Inc()
	}
}

// run writes queued records, flushing whenever the queue is empty (a
// file) or after each record (stderr, stdout: a line is one write there,
// between the log's lines). A file that would grow past its bound with the
// next record is rotated first.
func (w *writer) run() {
	defer close(w.done)
	bw := bufio.NewWriterSize(w.out, 64<<10)
	var line bytes.Buffer
	enc := json.NewEncoder(&line)
	enc.SetEscapeHTML(false)
	for r := range w.queue {
		line.Reset()
		if err := enc.Encode(r); err != nil {
			w.fail(err)
			continue
		}
		if w.file != nil && w.size > 0 && w.size+int64(line.Len()) > w.max {
			if err := bw.Flush(); err != nil {
				w.fail(err)
			}
			w.rotate()
			bw.Reset(w.out)
		}
		n, _ := bw.Write(line.Bytes())
		w.size += int64(n)
		w.written.Inc()
		if w.file == nil || len(w.queue) == 0 {
			if err := bw.Flush(); err != nil {
				w.fail(err)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		w.fail(err)
	}
}

// rotate moves the file output to path.1 and starts a new one.
func (w *writer) rotate() {
	_ = w.file.Close()
	if err := os.Rename(w.path, w.path+".1"); err != nil {
		w.fail(err)
	}
	if err := w.open(); err != nil {
		w.fail(err)
		w.out = io.Discard
	}
}

// fail reports the first output error (never a record's content).
func (w *writer) fail(err error) {
	w.dropped.Inc()
	if w.err == nil {
		w.err = err
		w.log.Error("audit: writing records failed; records are being dropped", "err", err)
	}
}

// close stops taking records, writes those queued and closes the file.
func (w *writer) close() error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	<-w.done
	if w.file != nil {
		if err := w.file.Close(); err != nil {
			return fmt.Errorf("audit: closing the output file: %w", err)
		}
	}
	return nil
}
