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
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	defaultBuffer       = 4096
	defaultBufferBytes  = 4 << 20
	defaultMaxFileBytes = 100 << 20
	// defaultCloseWait bounds how long Close waits for an output that
	// takes nothing (a pipe nobody reads).
	defaultCloseWait = 5 * time.Second
)

// writer writes records as JSON lines on a goroutine of its own, so a
// request only queues its record's line; a queue full in lines or in bytes
// drops it (counted).
type writer struct {
	queue     chan []byte
	queued    atomic.Int64 // bytes of the lines queued or being written
	maxQueued int64
	closeWait time.Duration
	done      chan struct{}
	mu        sync.RWMutex // closed and sending on queue
	closed    bool
	out       io.Writer
	file      *os.File // nil for stderr, stdout
	path      string
	size      int64
	max       int64
	log       hclog.Logger
	written   prometheus.Counter
	dropped   prometheus.Counter
	err       error // the first write error, reported once
}

// newWriter opens o's output and starts writing.
func newWriter(o Options) (*writer, error) {
	w := &writer{queue: make(chan []byte, cmp(o.Buffer, defaultBuffer)), maxQueued: int64(cmp(o.BufferBytes, defaultBufferBytes)), closeWait: defaultCloseWait,
		done: make(chan struct{}), log: o.Log, max: int64(cmp(int(o.MaxFileBytes), defaultMaxFileBytes)),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "mcp_mux_audit_records_total", Help: "Audit records written."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "mcp_mux_audit_records_dropped_total", Help: "Audit records dropped: the writer fell behind (a queue full in records or bytes) or its output failed."}),
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

// put queues r as its JSON line, or drops it when the queue is full in
// lines or in bytes (or the line is past MaxRecordBytes, which a record
// bounded by Record.bound is not).
func (w *writer) put(r Record) {
	line, err := encode(r)
	if err == nil && len(line) > MaxRecordBytes {
		err = fmt.Errorf("audit: a record of %d bytes, past the bound of %d", len(line), MaxRecordBytes)
	}
	if err != nil {
		w.dropped.Inc()
		w.log.Error("audit: a record was dropped", "err", err)
		return
	}
	n := int64(cap(line)) // what the queue holds
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.dropped.Inc()
		return
	}
	if w.queued.Add(n) > w.maxQueued {
		w.queued.Add(-n)
		w.dropped.Inc()
		return
	}
	select {
	case w.queue <- line:
	default:
		w.queued.Add(-n)
		w.dropped.Inc()
	}
}

// encode is r's JSON line.
func encode(r Record) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("audit: encoding a record: %w", err)
	}
	return b.Bytes(), nil
}

// run writes queued records, flushing whenever the queue is empty (a
// file) or after each record (stderr, stdout: a line is one write there,
// between the log's lines). A file that would grow past its bound with the
// next record is rotated first.
func (w *writer) run() {
	defer close(w.done)
	bw := bufio.NewWriterSize(w.out, 64<<10)
	for line := range w.queue {
		if w.file != nil && w.size > 0 && w.size+int64(len(line)) > w.max {
			if err := bw.Flush(); err != nil {
				w.fail(err)
			}
			w.rotate()
			bw.Reset(w.out)
		}
		n, _ := bw.Write(line)
		w.queued.Add(-int64(cap(line)))
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
// An output that does not take them within closeWait (a pipe nobody reads)
// keeps the rest: close returns, saying how much.
func (w *writer) close() error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	wait := time.NewTimer(w.closeWait)
	defer wait.Stop()
	select {
	case <-w.done:
	case <-wait.C:
		return fmt.Errorf("audit: the output did not take the queued records within %s; %d bytes of them are not written", w.closeWait, w.queued.Load())
	}
	if w.file != nil {
		if err := w.file.Close(); err != nil {
			return fmt.Errorf("audit: closing the output file: %w", err)
		}
	}
	return nil
}
