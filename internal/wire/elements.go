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
	if len(data) < 2 || data[0] != '[' {
		return nil
	}
	var out [][]byte
	depth, start := 0, -1
	elem := func(end int) {
		if start >= 0 {
			out = append(out, bytes.TrimSpace(data[start:end]))
		}
		start = -1
	}
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			end := stringEnd(data, i+1)
			if end < 0 {
				return nil
			}
			if depth == 1 && start < 0 {
				start = i
			}
			i = end
		case '{', '[':
			if depth == 1 && start < 0 {
				start = i
			}
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				if c != ']' || i != len(data)-1 {
					return nil // mismatched, or more after the array
				}
				elem(i)
				return out
			}
		case ',':
			if depth == 1 {
				elem(i)
			}
		case ' ', '\t', '\r', '\n':
		default:
			if depth == 1 && start < 0 {
				start = i
			}
		}
	}
	return nil // unterminated
}
