package stdioproc

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
)

// StderrLog collects what a stdio server's processes write on stderr. Lines
// are logged at debug (they may carry user content), at most stderrBurst a
// second, and not at all while the server is failing and being retried: a
// server that fails the same way on every attempt is not logged anew each
// time. Credential values mcp-mux holds for the server (its env values, its
// headers) are scrubbed first. The last stderrKeep distinct lines are kept,
// a line seen again moved to the end with its count (a server retried for
// ten minutes keeps one line, not the same line twenty times); a failed
// discovery appends Tail to the server's failure reason.
type StderrLog struct {
	log   hclog.Logger
	quiet func() bool         // true while retrying a failed server
	scrub func(string) string // removes credential values (the server's env, headers)

	mu      sync.Mutex
	kept    []stderrLine // distinct lines, oldest first; at most stderrKeep
	window  time.Time
	count   int
	dropped int
	now     func() time.Time
}

// stderrLine is one distinct kept line and how many times it was written.
type stderrLine struct {
	text string
	n    int
}

const (
	stderrBurst   = 20   // lines logged per second at most
	stderrKeep    = 10   // distinct lines kept for the failure reason
	stderrLineMax = 2048 // bytes kept of one line
	// StderrTailMax bounds Tail in characters (runes): the newest lines
	// that fit, the newest alone cut to fit.
	StderrTailMax = 1000
)

// NewStderrLog returns the stderr log of one server: lines go to log at
// debug, not while quiet reports true (nil: never quiet), after scrub
// (nil: none).
func NewStderrLog(log hclog.Logger, quiet func() bool, scrub func(string) string) *StderrLog {
	if scrub == nil {
		scrub = func(s string) string { return s }
	}
	return &StderrLog{log: log, quiet: quiet, scrub: scrub, now: time.Now}
}

// Writer returns the stderr of one process: it splits lines and hands them
// on. A muted writer keeps its lines for Tail but logs none until its
// process's UnmuteStderr (a process restarted after a probe, whose start-up
// lines were logged for the probed one already).
func (l *StderrLog) Writer(muted bool) *StderrWriter {
	w := &StderrWriter{l: l}
	w.muted.Store(muted)
	return w
}

// add records one line, and logs it unless muted.
func (l *StderrLog) add(line []byte, muted bool) {
	line = bytes.TrimRight(line, "\r")
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if len(line) > stderrLineMax {
		line = line[:stderrLineMax]
	}
	text := l.scrub(strings.ToValidUTF8(string(line), "\uFFFD"))
	l.mu.Lock()
	l.keepLocked(text)
	logIt := l.allowLocked()
	l.mu.Unlock()
	if logIt && !muted && (l.quiet == nil || !l.quiet()) {
		l.log.Debug(text)
	}
}

// keepLocked appends text to the kept lines, or moves the same line to the
// end with its count raised; l.mu is held.
func (l *StderrLog) keepLocked(text string) {
	n := 1
	for i, k := range l.kept {
		if k.text == text {
			n += k.n
			l.kept = append(l.kept[:i], l.kept[i+1:]...)
			break
		}
	}
	if len(l.kept) == stderrKeep {
		l.kept = append(l.kept[:0], l.kept[1:]...)
	}
	l.kept = append(l.kept, stderrLine{text: text, n: n})
}

// allowLocked applies the rate limit; l.mu is held.
func (l *StderrLog) allowLocked() bool {
	now := l.now()
	if now.Sub(l.window) >= time.Second {
		if l.dropped > 0 {
			l.log.Debug("stderr lines left out by the rate limit", "dropped", l.dropped)
		}
		l.window, l.count, l.dropped = now, 0, 0
	}
	if l.count >= stderrBurst {
		l.dropped++
		return false
	}
	l.count++
	return true
}

// Tail returns the kept lines, oldest first, each written more than once
// followed by its count (" (×20)"): the newest lines whose text fits in
// StderrTailMax characters in all, the newest alone cut to fit ("…").
func (l *StderrLog) Tail() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	left := StderrTailMax
	for i := len(l.kept) - 1; i >= 0; i-- {
		text, count := l.kept[i].text, ""
		if l.kept[i].n > 1 {
			count = " (×" + strconv.Itoa(l.kept[i].n) + ")"
		}
		r := utf8.RuneCountInString(text) + utf8.RuneCountInString(count)
		if r > left {
			if len(out) == 0 { // the newest line alone: cut, keeping its count
				text = string([]rune(text)[:left-utf8.RuneCountInString(count)-1]) + "…"
				out = append(out, text+count)
			}
			break
		}
		left -= r
		out = append(out, text+count)
	}
	slices.Reverse(out)
	return out
}

// Last returns the newest kept line without its count, "" when there is
// none.
func (l *StderrLog) Last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.kept) == 0 {
		return ""
	}
	return l.kept[len(l.kept)-1].text
}

// StderrWriter is one process's stderr, cut into lines. While muted, lines
// are kept for the failure reason but not logged.
type StderrWriter struct {
	l     *StderrLog
	muted atomic.Bool
	mu    sync.Mutex
	buf   []byte
}

// Write hands every complete line of b (and a line grown past 8 KiB
// without an end) to the log.
func (w *StderrWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) > 8<<10 { // a line without end: take what there is
				w.l.add(w.buf, w.muted.Load())
				w.buf = w.buf[:0]
			}
			return len(b), nil
		}
		w.l.add(w.buf[:i], w.muted.Load())
		w.buf = w.buf[i+1:]
	}
}
