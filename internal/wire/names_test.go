package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestFoldNameMatchesEncodingJSON: for every rune of the Basic
// Multilingual Plane (where every case orbit that reaches ASCII lies) and
// every ASCII letter, FoldName folds them alike exactly when
// encoding/json matches a member named by the rune to a field named by the
// letter (bytes.EqualFold); and '_' and '-' are ignored.
func TestFoldNameMatchesEncodingJSON(t *testing.T) {
	var letters [26]string
	for i := range letters {
		letters[i] = FoldName(string(rune('a' + i)))
	}
	var buf [utf8.UTFMax]byte
	for r := rune(0x80); r <= 0xFFFF; r++ { // ASCII: below
		if !utf8.ValidRune(r) {
			continue
		}
		s := buf[:utf8.EncodeRune(buf[:], r)]
		f := FoldName(string(s))
		for i, lf := range letters {
			if want := bytes.EqualFold(s, []byte{byte('a' + i)}); (f == lf) != want {
				t.Fatalf("FoldName(%U) = %q vs %q: want alike=%v", r, f, lf, want)
			}
		}
	}
	for c := range 128 {
		for i, lf := range letters {
			if want := bytes.EqualFold([]byte{byte(c)}, []byte{byte('a' + i)}); (FoldName(string(rune(c))) == lf) != want && c != '_' && c != '-' {
				t.Fatalf("FoldName(%q) vs %q: want alike=%v", rune(c), lf, want)
			}
		}
	}
	for a, b := range map[string]string{"ſcope": "scope", "\u212aey": "KEY", "acc_ount": "ACCOUNT", "a-b_c": "abc", "ǅ": "ǆ"} {
		if FoldName(a) != FoldName(b) {
			t.Errorf("FoldName(%q) = %q, FoldName(%q) = %q", a, FoldName(a), b, FoldName(b))
		}
	}
	for a, b := range map[string]string{"scope": "scopes", "a.b": "ab", "a b": "ab", "é": "e"} {
		if FoldName(a) == FoldName(b) {
			t.Errorf("FoldName(%q) = FoldName(%q)", a, b)
		}
	}
	// encoding/json itself: the folded names it takes for a field are the ones FoldName folds alike.
	var v struct {
		Scope string `json:"scope"`
	}
	for _, name := range []string{"ſcope", "SCOPE", "\u017fCOPE", "Scope"} {
		v.Scope = ""
		b, _ := json.Marshal(map[string]string{name: "x"})
		if json.Unmarshal(b, &v); v.Scope != "x" || FoldName(name) != FoldName("scope") {
			t.Errorf("%q: encoding/json read %q, FoldName %q", name, v.Scope, FoldName(name))
		}
	}
}

func TestMembers(t *testing.T) {
	ms, err := Members([]byte(` { "a" : 1 , "b\u0063":{"a":[1,{"a":2}]}, "d":"}," } `))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Name+"="+string(m.Raw))
	}
	if want := `a="a" : 1|bc="b\u0063":{"a":[1,{"a":2}]}|d="d":"},"`; strings.Join(got, "|") != want {
		t.Errorf("Members = %s, want %s", strings.Join(got, "|"), want)
	}
	for in, want := range map[string]error{
		`{}`: nil, `[]`: nil, `1`: nil, ``: nil, `{"a":1,"a":1}`: &DuplicateNameError{}, `{"a":1`: ErrNotJSON,
		strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1): ErrTooDeep,
	} {
		_, err := Members([]byte(in))
		var dup *DuplicateNameError
		if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want) && !(errors.As(want, &dup) && errors.As(err, &dup))) {
			t.Errorf("Members(%.40s) = %v, want %v", in, err, want)
		}
	}
	// Past linearNames an object's names go in a set.
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < 1000; i++ {
		b.WriteString(`"k` + strings.Repeat("x", i) + `":0,`)
	}
	if err := CheckNames([]byte(b.String() + `"z":0}`)); err != nil {
		t.Errorf("1001 names: %v", err)
	}
	var dup *DuplicateNameError
	if err := CheckNames([]byte(b.String() + `"kxx":0}`)); !errors.As(err, &dup) || dup.Name != "kxx" {
		t.Errorf("the 1001st name repeating the 3rd: %v", err)
	}
}

// refDuplicate reports whether an object in data repeats a member name,
// found with encoding/json's tokenizer.
func refDuplicate(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		obj   bool
		names map[string]bool
		key   bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.obj && top.key {
			if top.names[s] {
				return true
			}
			top.names[s] = true
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, &frame{obj: tok == json.Delim('{'), names: map[string]bool{}})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].key = true
		}
	}
}

// FuzzCheckNames: CheckNames finds a repeated name exactly when
// encoding/json's tokenizer does, in valid JSON; and Members' raw members
// rebuild the object.
func FuzzCheckNames(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":1},"b":{"a":[{"c":0,"\u0063":1}]}}`, `[{"x":"\"","x\"":1}]`, `{"é":1,"\u00e9":2}`, "{\"\xff\":1,\"\xfe\":2}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.Count(data, []byte("[")) > 100 || bytes.Count(data, []byte("{")) > 100 {
			return
		}
		ms, err := Members(data)
		if !json.Valid(data) {
			if err == nil && len(bytes.TrimSpace(data)) > 0 {
				t.Fatalf("Members(%q): no error for invalid JSON", data)
			}
			return
		}
		want := refDuplicate(data)
		var dup *DuplicateNameError
		switch {
		case !want && err != nil:
			t.Fatalf("Members(%q) = %v; encoding/json sees no repeated name", data, err)
		case want && !errors.As(err, &dup):
			t.Fatalf("Members(%q) = %v; encoding/json sees a repeated name", data, err)
		case err != nil:
			return
		}
		if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
			return
		}
		var b []byte
		b = append(b, '{')
		for i, m := range ms {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, m.Raw...)
		}
		b = append(b, '}')
		var x, y map[string]any
		if json.Unmarshal(data, &x) != nil || json.Unmarshal(b, &y) != nil || len(x) != len(ms) || len(y) != len(x) {
			t.Fatalf("members of %q rebuild %q", data, b)
		}
		for _, m := range ms {
			if _, ok := x[m.Name]; !ok {
				t.Fatalf("member %q of %q: no such name", m.Name, data)
			}
		}
	})
}
