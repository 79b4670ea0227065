package status

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBound(t *testing.T) {
	if Bound(nil) != nil {
		t.Error("nil is not nil")
	}
	var lines []string
	for i := range 25 {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	got := Bound(lines)
	if len(got) != MaxLines || got[0] != "line 0" || got[MaxLines-2] != "line 18" || got[MaxLines-1] != "… and 6 more" {
		t.Errorf("Bound(25 lines) = %q", got)
	}
	if got := Bound(lines[:MaxLines]); len(got) != MaxLines || got[MaxLines-1] != "line 19" {
		t.Errorf("Bound(%d lines) = %q", MaxLines, got)
	}
	long := strings.Repeat("é", MaxLineBytes) // 2 bytes each
	cut := Bound([]string{long})[0]
	if len(cut) > MaxLineBytes || !utf8.ValidString(cut) || !strings.HasSuffix(cut, "…") {
		t.Errorf("a long line is cut to %d bytes, valid %v", len(cut), utf8.ValidString(cut))
	}
}
