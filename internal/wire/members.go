package wire

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// MemberValues calls fn with each member of the object data holds, in order and
// duplicates included: its name as a decoder matches it (escapes decoded)
// and its raw value, whatever its type. It decodes nothing but names
// written with escapes, stops when fn returns false, and reports whether
// data is an object it walked to the end. Like Scan it skips strings, so
// brackets inside them never count; a value it cannot delimit ends the
// walk (the decoder that follows rejects such input).
func MemberValues(data []byte, fn func(name string, value []byte) bool) bool {
	data = bytes.TrimSpace(data)
	if len(data) < 2 || data[0] != '{' {
		return false
	}
	i := skipSpace(data, 1)
	if i < len(data) && data[i] == '}' {
		return true
	}
	for i < len(data) && data[i] == '"' {
		end := stringEnd(data, i+1)
		if end < 0 {
			return false
		}
		name, ok := memberName(data[i : end+1])
		if !ok {
			return false
		}
		i = skipSpace(data, end+1)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = skipSpace(data, i+1)
		vend := valueEnd(data, i)
		if vend < 0 || !fn(name, data[i:vend]) {
			return false
		}
		i = skipSpace(data, vend)
		if i < len(data) && data[i] == '}' {
			return true
		}
		if i >= len(data) || data[i] != ',' {
			return false
		}
		i = skipSpace(data, i+1)
	}
	return false
}

// memberName is a quoted member name as a decoder sees it.
func memberName(q []byte) (string, bool) {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1]), true
	}
	var s string
	if json.Unmarshal(q, &s) != nil {
		return "", false
	}
	return s, true
}

// StringLen is the length in bytes of the JSON string v holds (escapes
// decoded), or -1 when v is not a string.
func StringLen(v []byte) int {
	if len(v) < 2 || v[0] != '"' {
		return -1
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return len(v) - 2
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return -1
	}
	return len(s)
}

// valueEnd returns the index just past the JSON value that starts at i,
// or -1 when it does not end within data.
func valueEnd(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		end := stringEnd(data, i+1)
		if end < 0 {
			return -1
		}
		return end + 1
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				if j = stringEnd(data, j+1); j < 0 {
					return -1
				}
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	end := scalarEnd(data, i)
	if end == i {
		return -1
	}
	return end
}

// skipSpace returns the index of the first non-whitespace byte at or after i.
func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// FoldIs reports whether name folds to folded (FoldName(name) ==
// folded, without allocating): folded is upper-case ASCII with no '_' or
// '-', as FoldName writes it.
func FoldIs(name, folded string) bool {
	j := 0
	for i := 0; i < len(name); {
		c := name[i]
		var r rune
		if c < utf8.RuneSelf {
			i++
			if c == '_' || c == '-' {
				continue
			}
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			r = rune(c)
		} else {
			var n int
			r, n = utf8.DecodeRuneInString(name[i:])
			r = foldRune(r)
			i += n
		}
		if j >= len(folded) || r >= utf8.RuneSelf || byte(r) != folded[j] {
			return false
		}
		j++
	}
	return j == len(folded)
}
