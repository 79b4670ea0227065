package wire

import "bytes"

// Elements returns the elements of the top-level JSON array data holds, as
// raw bytes without surrounding whitespace, or nil when data is not one
// array. It decodes nothing and, like Scan, skips strings, so brackets and
// commas inside them never count; it does not validate the elements (their
// decoder does). It is how a batch too deep to decode as a whole can still
// be read element by element.
func Elements(data []byte) [][]byte {
	data = bytes.TrimSpace(data)
	if !isArrayText(data) {
		return nil
	}
	s := splitter{data: data, start: -1}
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			s.begin(i)
			if i = stringEnd(data, i+1); i < 0 {
				return nil
			}
		case '{', '[':
			s.begin(i)
			s.depth++
		case '}', ']':
			if s.depth--; s.depth == 0 {
				return s.last(c, i)
			}
		case ',':
			if s.depth == 1 {
				s.cut(i)
			}
		case ' ', '\t', '\r', '\n':
		default:
			s.begin(i)
		}
	}
	return nil // unterminated
}

// splitter is Elements' state while it walks an array.
type splitter struct {
	data  []byte
	out   [][]byte
	depth int
	start int // where the current element began, or -1
}

// begin marks i as the start of an element when it is the first byte of one.
func (s *splitter) begin(i int) {
	if s.depth == 1 && s.start < 0 {
		s.start = i
	}
}

// cut ends the current element, if one began, before end.
func (s *splitter) cut(end int) {
	if s.start >= 0 {
		s.out = append(s.out, bytes.TrimSpace(s.data[s.start:end]))
	}
	s.start = -1
}

// last ends the last element at the bracket c at i that closes the
// top-level array, and returns the elements, or nil when c is not ']' or
// more follows it.
func (s *splitter) last(c byte, i int) [][]byte {
	if c != ']' || i != len(s.data)-1 {
		return nil // mismatched, or more after the array
	}
	s.cut(i)
	return s.out
}

// isArrayText reports whether data, trimmed, may hold an array: it opens
// with '[' and has room for the closing bracket.
func isArrayText(data []byte) bool {
	return len(data) >= 2 && data[0] == '['
}
