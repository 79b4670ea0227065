package wire

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string the way go-sdk writes one
// (encoding/json with SetEscapeHTML(false)): '<', '>' and '&' stay as they
// are; quotes, backslashes, control characters, U+2028 and U+2029 are
// escaped; invalid UTF-8 becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if !isPlainASCII(b) {
				dst = appendEscapedByte(append(dst, s[start:i]...), b)
				start = i + 1
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if esc := runeEscape(r, size); esc != "" {
			dst = append(append(dst, s[start:i]...), esc...)
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// isPlainASCII reports whether a JSON string carries the ASCII byte b as it
// is: all but control characters, the quote and the backslash.
func isPlainASCII(b byte) bool {
	return b >= 0x20 && b != '"' && b != '\\'
}

// controlEscapes holds, for each control character below 0x20, the letter
// JSON escapes it with after a backslash, or '0' for a \u00XX escape.
const controlEscapes = "00000000btn0fr000000000000000000"

// appendEscapedByte appends the escape of an ASCII byte isPlainASCII
// refuses: a quote, a backslash or a control character.
func appendEscapedByte(dst []byte, b byte) []byte {
	if b == '"' || b == '\\' {
		return append(dst, '\\', b)
	}
	if e := controlEscapes[b]; e != '0' {
		return append(dst, '\\', e)
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
}

// runeEscape returns what a decoded rune of size bytes is written as when it
// is not written as it is: invalid UTF-8 as U+FFFD, and U+2028 and U+2029
// (line and paragraph separators, which JavaScript reads as line ends)
// escaped; or "" for a rune written as it is.
func runeEscape(r rune, size int) string {
	switch {
	case r == utf8.RuneError && size == 1:
		return `\ufffd`
	case r == '\u2028':
		return `\u2028`
	case r == '\u2029':
		return `\u2029`
	}
	return ""
}
