package headercheck

import (
	"strings"
	"testing"
)

func TestCheckValue(t *testing.T) {
	tests := []struct {
		name, value, want string // want "" = accepted
	}{
		{"empty", "", ""},
		{"bearer", "Bearer abc.def", ""},
		{"internal tab", "Bearer abc\tdef", ""},
		{"internal spaces", "two words", ""},
		{"DEL", "a\x7fb", ""},
		{"all printable", "!\"#$%&'()*+,-./0123456789:;<=>?@AZ[\\]^_`az{|}~", ""},
		{"LF", "abc\n", reasonControl},
		{"CR", "a\rb", reasonControl},
		{"CRLF injection", "x\r\nX-Evil: 1", reasonControl},
		{"NUL", "a\x00b", reasonControl},
		{"VT", "a\vb", reasonControl},
		{"FF", "a\fb", reasonControl},
		{"other C0", "a\x01b", reasonControl},
		{"ESC", "a\x1bb", reasonControl},
		{"leading space", " abc", reasonWhitespace},
		{"trailing space", "abc ", reasonWhitespace},
		{"leading tab", "\tabc", reasonWhitespace},
		{"trailing tab", "abc\t", reasonWhitespace},
		{"only space", " ", reasonWhitespace},
		{"latin-1", "caf\u00e9", reasonNonASCII},
		{"cyrillic", "\u0442\u043e\u043a\u0435\u043d", reasonNonASCII},
		{"non-ASCII wins over newline", "\n\u00e9", reasonNonASCII},
		{"control wins over whitespace", " a\n", reasonControl},
		{"invalid utf-8", "a\xffb", reasonNonASCII},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckValue(tt.value)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("CheckValue(%q) = %q, want %q", tt.value, got, tt.want)
			}
		})
	}
}

func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"Authorization", true},
		{"X-API-Key", true},
		{"x_custom.header~1!#$%&'*+^`|", true},
		{"", false},
		{"X Foo", false},
		{"X-Foo:", false},
		{"X-Foo\n", false},
		{"(X)", false},
		{"X-\u00e9", false},
		{"a\"b", false},
	}
	for _, tt := range tests {
		if err := CheckName(tt.name); (err == nil) != tt.ok {
			t.Errorf("CheckName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func FuzzCheckValue(f *testing.F) {
	for _, s := range []string{"", "Bearer abc", "a\r\nb", " x", "x\t", "\x00", "caf\u00e9", "a\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		err := CheckValue(v)
		if err != nil {
			if len(v) > 3 && strings.Contains(err.Error(), v) {
				t.Fatalf("error %q repeats the value", err)
			}
			return
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			t.Fatalf("accepted a value with CR, LF or NUL: %q", v)
		}
		if strings.Trim(v, " \t") != v {
			t.Fatalf("accepted a value with surrounding whitespace: %q", v)
		}
	})
}
