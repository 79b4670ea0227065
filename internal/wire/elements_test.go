package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestElements(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{`[]`, nil},
		{` [ 1 , "a,]" ,{"b":[1,2]}, null ] `, []string{`1`, `"a,]"`, `{"b":[1,2]}`, `null`}},
		{`[{"x":"\"]"}]`, []string{`{"x":"\"]"}`}},
		{`{"a":1}`, nil},
		{`[1,2`, nil},
		{`[1] [2]`, nil},
		{`[1}`, nil},
	} {
		got := Elements([]byte(c.in))
		if len(got) != len(c.want) {
			t.Errorf("Elements(%s) = %q, want %q", c.in, got, c.want)
			continue
		}
		for i := range got {
			if string(got[i]) != c.want[i] {
				t.Errorf("Elements(%s)[%d] = %s, want %s", c.in, i, got[i], c.want[i])
			}
		}
	}
}

// FuzzElements: any input is split or refused without panicking, and a
// valid JSON array splits into exactly the elements encoding/json finds.
func FuzzElements(f *testing.F) {
	f.Add([]byte(`[1,"a,]",{"b":[1,2]},null]`))
	f.Add([]byte(`[{"x":"\"]"}, [[]] ]`))
	f.Add([]byte(`[1,2`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got := Elements(data)
		var want []json.RawMessage
		if bytes.HasPrefix(bytes.TrimSpace(data), []byte("[")) && json.Unmarshal(data, &want) == nil {
			if len(got) != len(want) {
				t.Fatalf("Elements(%q): %d elements, encoding/json finds %d", data, len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("Elements(%q)[%d] = %q, want %q", data, i, got[i], want[i])
				}
			}
		}
	})
}
