package wire

import (
	"bytes"
	"errors"
	"strconv"
)

// MaxDepth is the deepest nesting of arrays and objects mcp-mux reads from a
// client or an upstream, counted from the message's outermost bracket. It is
// go-sdk's own limit, so a message that passes here never fails the SDK's
// check, and it is far beyond real MCP traffic: a JSON Schema for a tool's
// arguments nests tens of levels. Deeper input is refused before any decoder
// sees it: segmentio's decoder, which the fast path uses, recurses once per
// level and overflows the stack on a few megabytes of brackets.
const MaxDepth = 1000

// MaxBatch is the most messages a 2025-03-26 JSON-RPC batch may carry.
// Batching was dropped from the protocol in 2025-06-18; clients that still
// send batches send a handful of messages.
const MaxBatch = 32

// ErrTooDeep reports JSON nested deeper than MaxDepth.
var ErrTooDeep = errors.New("JSON nested deeper than " + strconv.Itoa(MaxDepth) + " levels")

// Shape is what Scan found out about a message.
type Shape struct {
	// Batch is set when the top-level value is an array.
	Batch bool
	// Len is the number of elements of a batch.
	Len int
}

// Scan makes one allocation-free pass over data and returns ErrTooDeep if
// arrays and objects nest deeper than MaxDepth. It does not validate the
// JSON otherwise (the decoder that follows does), but it skips strings
// correctly, so brackets inside strings never count.
func Scan(data []byte) (Shape, error) {
	var s shapeScan
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			end := stringEnd(data, i+1)
			if end < 0 {
				return s.sh, nil // unterminated: the decoder reports it
			}
			s.value()
			i = end
		case '{', '[':
			if !s.open(c) {
				return s.sh, ErrTooDeep
			}
		case '}', ']':
			s.depth--
		case ',':
			s.comma()
		case ' ', '\t', '\r', '\n':
		default:
			s.value()
		}
	}
	return s.sh, nil
}

// shapeScan is Scan's state while it walks a message. Its steps are small
// enough for the compiler to inline into Scan's loop.
type shapeScan struct {
	sh    Shape
	depth int
	elems bool // the top-level array has a first element
}

// value notes a byte that begins or continues a value: at depth 1 of a
// batch, the first such byte begins the first element.
func (s *shapeScan) value() {
	if s.depth == 1 && s.sh.Batch && !s.elems {
		s.elems = true
		s.sh.Len = 1
	}
}

// open enters the array or object c opens, the top-level '[' marking a
// batch; it reports false when that goes deeper than MaxDepth.
func (s *shapeScan) open(c byte) bool {
	if s.depth == 0 && c == '[' {
		s.sh.Batch = true
	} else {
		s.value()
	}
	s.depth++
	return s.depth <= MaxDepth
}

// comma counts a comma between a batch's elements.
func (s *shapeScan) comma() {
	if s.depth == 1 && s.sh.Batch {
		s.sh.Len++
	}
}

// stringEnd returns the index of the quote that closes the string whose
// contents start at i, or -1.
func stringEnd(data []byte, i int) int {
	for {
		j := bytes.IndexByte(data[i:], '"')
		if j < 0 {
			return -1
		}
		j += i
		// The quote is escaped when an odd number of backslashes precede it.
		k := j
		for k > i && data[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j
		}
		i = j + 1
	}
}
