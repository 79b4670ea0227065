// Package eventstream reads a text/event-stream (the WHATWG event stream
// format) one bounded event at a time, keeping what resuming a stream
// needs: the last event id and the reconnection time the server asked for.
package eventstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Reader reads a text/event-stream from an upstream one event at a time.
// Besides each event's data it keeps the fields resumption needs: the last
// event id and the reconnection time the server asked for (retry). Every
// line and event is bounded by max bytes.
type Reader struct {
	br     *bufio.Reader
	max    int
	lastID string        // the last id field seen
	retry  time.Duration // the last retry field seen; 0 if none
	data   []byte
}

// NewReader returns a Reader of r whose lines and events are bounded by
// max bytes.
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 4096), max: max}
}

// LastID is the last event id the stream gave; "" if none.
func (r *Reader) LastID() string { return r.lastID }

// Retry is the last reconnection time the stream asked for; 0 if none.
func (r *Reader) Retry() time.Duration { return r.retry }

// Resumed returns the Reader of the stream that continues r's on rc (a
// resumption), keeping r's last event id and retry.
func (r *Reader) Resumed(rc io.Reader) *Reader {
	next := NewReader(rc, r.max)
	next.lastID, next.retry = r.lastID, r.retry
	return next
}

// ErrTooLarge reports an event or line longer than the bound.
var ErrTooLarge = errors.New("upstream event too large")

// Next returns the data of the next event that has any (events without
// data, such as a priming event carrying only id and retry, update lastID and
// retry and are skipped). It returns io.EOF (or the read error) when the
// stream ends; an event cut off by the end is dropped, as the format says.
func (r *Reader) Next() ([]byte, error) {
	r.data = r.data[:0]
	hasData := false
	for {
		line, err := r.line()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 { // end of an event
			if d := bytes.TrimSuffix(r.data, []byte{'\n'}); hasData && len(d) > 0 {
				return d, nil
			}
			r.data, hasData = r.data[:0], false
			continue
		}
		data, err := r.field(line)
		if err != nil {
			return nil, err
		}
		hasData = hasData || data
	}
}

// field applies one non-empty line of an event: a data line's value is
// added to the event's data (true), id and retry are recorded, comments
// and other fields ignored.
func (r *Reader) field(line []byte) (data bool, err error) {
	if line[0] == ':' { // comment
		return false, nil
	}
	name, value, _ := bytes.Cut(line, []byte{':'})
	value = bytes.TrimPrefix(value, []byte{' '})
	switch string(name) {
	case "data":
		if len(r.data)+len(value)+1 > r.max {
			return false, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, r.max)
		}
		r.data = append(append(r.data, value...), '\n')
		return true, nil
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.lastID = string(value)
		}
	case "retry":
		if ms, err := strconv.ParseUint(string(value), 10, 31); err == nil {
			r.retry = time.Duration(ms) * time.Millisecond
		}
	}
	return false, nil
}

// line reads one line without its terminator (LF or CRLF), bounded by max.
func (r *Reader) line() ([]byte, error) {
	var long []byte
	for {
		b, err := r.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(b) > r.max {
				return nil, fmt.Errorf("%w: a line of more than %d bytes", ErrTooLarge, r.max)
			}
			long = append(long, b...)
			continue
		}
		if err != nil {
			// A line cut off by the end of the stream belongs to an event
			// that never completed.
			return nil, err
		}
		if long != nil {
			b = append(long, b...)
		}
		b = b[:len(b)-1]
		return bytes.TrimSuffix(b, []byte{'\r'}), nil
	}
}
