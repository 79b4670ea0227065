package wire

// TooDeepAt returns the offset of the first '{' or '[' in data that opens a
// level deeper than limit, or -1 when nesting stays within it. Like Scan it
// makes one allocation-free pass that skips strings and validates nothing
// else; it is how a caller with its own bound (the config loader's) checks
// depth before any decoder builds a tree.
func TooDeepAt(data []byte, limit int) int {
	depth := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			end := stringEnd(data, i+1)
			if end < 0 {
				return -1 // unterminated: the decoder reports it
			}
			i = end
		case '{', '[':
			depth++
			if depth > limit {
				return i
			}
		case '}', ']':
			depth--
		}
	}
	return -1
}
