package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode"
	"unicode/utf8"
)

// Member names as an upstream's decoder reads them. Go's encoding/json
// matches a member to a struct field case-insensitively (Unicode simple
// folding, so "ſcope" is "scope" and "\u212aey", the Kelvin sign, is "key")
// and lets the last of two matching members win; encoding/json/v2's
// case-insensitive matching also ignores '_' and '-', and so do the
// snake/camel/kebab aliases of other decoders (pydantic's populate_by_name).
// A value mcp-mux sets over a caller's must therefore replace every member
// such a decoder would take for it, and arguments that repeat a name are
// refused, since decoders disagree on which of the two counts.

// FoldName is name's folded form: two names fold alike when some lenient
// decoder takes them for one field. Each rune becomes the smallest rune of
// its simple case-folding orbit (exactly encoding/json's foldName, invalid
// UTF-8 as U+FFFD), and '_' and '-' are dropped.
func FoldName(name string) string {
	out := make([]byte, 0, len(name))
	for i := 0; i < len(name); {
		c := name[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c == '_' || c == '-':
			case 'a' <= c && c <= 'z':
				out = append(out, c-'a'+'A')
			default:
				out = append(out, c)
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(name[i:])
		out = utf8.AppendRune(out, foldRune(r))
		i += n
	}
	return string(out)
}

// foldRune is the smallest rune of r's simple folding orbit.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// DuplicateNameError reports an object that repeats a member name. Name is
// the name as decoded, unbounded: whoever shows it must clip it.
type DuplicateNameError struct{ Name string }

func (e *DuplicateNameError) Error() string { return "an object repeats a member name" }

// ErrNotJSON reports a value that is not valid JSON.
var ErrNotJSON = errors.New("not valid JSON")

// Member is one member of a JSON object: its name as a decoder reads it
// (escapes decoded, invalid UTF-8 as U+FFFD) and its text as written, from
// the name's opening quote to the end of its value.
type Member struct {
	Name string
	Raw  []byte
}

// CheckNames returns a *DuplicateNameError for the first object in data,
// at any depth, that repeats a member name (names compared as decoded),
// ErrNotJSON when data is not one valid JSON value and ErrTooDeep past
// MaxDepth. Empty data is no value and no error.
func CheckNames(data []byte) error {
	_, err := scanNames(data, false)
	return err
}

// Members is CheckNames that also returns the members of the object data
// holds, in order (none when data holds another kind of value).
func Members(data []byte) ([]Member, error) {
	return scanNames(data, true)
}

// scanNames is CheckNames, collecting the top-level members when keep is
// set.
func scanNames(data []byte, keep bool) ([]Member, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	if !json.Valid(data) {
		return nil, ErrNotJSON
	}
	var frames [16]nameFrame // most arguments nest less and name fewer: no allocation
	var names [32][]byte
	s := nameScan{frames: frames[:0], names: names[:0], keep: keep, member: -1}
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			end := stringEnd(data, i+1) // data is valid: the string ends
			if err := s.str(data, i, end); err != nil {
				return nil, err
			}
			i = end
		case '{', '[':
			if len(s.frames) == MaxDepth {
				return nil, ErrTooDeep
			}
			s.frames = append(s.frames, nameFrame{obj: c == '{', key: c == '{', start: len(s.names)})
		case '}', ']':
			s.endMember(data, i)
			f := s.frames[len(s.frames)-1]
			s.names = s.names[:f.start]
			s.frames = s.frames[:len(s.frames)-1]
		case ',':
			s.endMember(data, i)
			if f := &s.frames[len(s.frames)-1]; f.obj {
				f.key = true
			}
		}
	}
	return s.members, nil
}

// linearNames is how many names an object's duplicate check compares one
// by one; past it the object's names go in a set.
const linearNames = 16

// nameScan is scanNames' state: the open arrays and objects, the names of
// the open objects (one run per object), and the top-level members.
type nameScan struct {
	frames  []nameFrame
	names   [][]byte
	keep    bool
	member  int // where the current top-level member starts, or -1
	name    string
	members []Member
}

// nameFrame is one open array or object.
type nameFrame struct {
	obj   bool
	key   bool // the next string is a member name
	start int  // the object's first name in nameScan.names
	set   map[string]struct{}
}

// str handles the string whose quotes are at i and end: a member name is
// checked against its object's others.
func (s *nameScan) str(data []byte, i, end int) error {
	if len(s.frames) == 0 {
		return nil
	}
	f := &s.frames[len(s.frames)-1]
	if !f.key {
		return nil
	}
	f.key = false
	name := decodedName(data[i : end+1])
	if err := s.add(f, name); err != nil {
		return err
	}
	if s.keep && len(s.frames) == 1 {
		s.member, s.name = i, string(name)
	}
	return nil
}

// add records name in f's object, or reports it repeated.
func (s *nameScan) add(f *nameFrame, name []byte) error {
	if f.set != nil {
		if _, dup := f.set[string(name)]; dup {
			return &DuplicateNameError{Name: string(name)}
		}
		f.set[string(name)] = struct{}{}
		return nil
	}
	own := s.names[f.start:]
	for _, n := range own {
		if bytes.Equal(n, name) {
			return &DuplicateNameError{Name: string(name)}
		}
	}
	if len(own) < linearNames {
		s.names = append(s.names, name)
		return nil
	}
	f.set = make(map[string]struct{}, 2*linearNames)
	for _, n := range own {
		f.set[string(n)] = struct{}{}
	}
	f.set[string(name)] = struct{}{}
	return nil
}

// endMember closes the top-level member whose value ends before the ',' or
// the object's closing brace at i.
func (s *nameScan) endMember(data []byte, i int) {
	if !s.keep || len(s.frames) != 1 || s.member < 0 {
		return
	}
	s.members = append(s.members, Member{Name: s.name, Raw: bytes.TrimSpace(data[s.member:i])})
	s.member = -1
}

// decodedName is the quoted JSON string q as encoding/json decodes it: as
// written when it has no escape and is valid UTF-8 (no copy), else
// unescaped with invalid UTF-8 replaced by U+FFFD.
func decodedName(q []byte) []byte {
	raw := q[1 : len(q)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return raw
	}
	var s string
	if json.Unmarshal(q, &s) != nil {
		return raw // cannot happen: q is a string of valid JSON
	}
	return []byte(s)
}
