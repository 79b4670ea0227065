package secret

import "strings"

// Redact returns text with every occurrence of a registered value
// replaced by Redacted — overlapping or adjacent occurrences as one — and
// how many it replaced. Unlike Scrub (strings.Replacer, whose work per
// position grows with the longest value), it reads the text once through
// an Aho–Corasick automaton of the values: its work is linear in the
// text whatever the values are (the automaton is built once per
// Scrubber, in time linear in the values' total length).
func (s *Scrubber) Redact(text string) (string, int) {
	var work int
	return s.redact(text, &work)
}

// redact is Redact counting the automaton's steps in work.
func (s *Scrubber) redact(text string, work *int) (string, int) {
	if s == nil {
		return text, 0
	}
	s.mu.Lock()
	if len(s.pairs) == 0 {
		s.mu.Unlock()
		return text, 0
	}
	if s.ac == nil {
		olds := make([]string, 0, len(s.pairs)/2)
		for i := 0; i < len(s.pairs); i += 2 {
			olds = append(olds, s.pairs[i])
		}
		s.ac = newAutomaton(olds)
	}
	a := s.ac
	s.mu.Unlock()
	spans := a.find(text, work)
	if len(spans) == 0 {
		return text, 0
	}
	var b strings.Builder
	b.Grow(len(text))
	at := 0
	for _, sp := range spans {
		b.WriteString(text[at:sp[0]])
		b.WriteString(Redacted)
		at = sp[1]
	}
	b.WriteString(text[at:])
	return b.String(), len(spans)
}

// automaton is an Aho–Corasick automaton over byte strings: goto edges
// in one map, failure links, and per state the longest value ending there
// (its own or a suffix's).
type automaton struct {
	edges   map[uint64]int32 // state<<8 | byte → state
	kids    [][]int32        // children, for building the failure links
	fail    []int32
	longest []int32
}

// newAutomaton builds the automaton of values.
func newAutomaton(values []string) *automaton {
	a := &automaton{edges: map[uint64]int32{}, kids: [][]int32{nil}, fail: []int32{0}, longest: []int32{0}}
	for _, v := range values {
		n := int32(0)
		for i := 0; i < len(v); i++ {
			k := uint64(n)<<8 | uint64(v[i])
			c, ok := a.edges[k]
			if !ok {
				c = int32(len(a.fail))
				a.edges[k] = c
				a.kids[n] = append(a.kids[n], c)
				a.kids, a.fail, a.longest = append(a.kids, nil), append(a.fail, 0), append(a.longest, 0)
			}
			n = c
		}
		a.longest[n] = max(a.longest[n], int32(len(v)))
	}
	a.link()
	return a
}

// link sets the failure links breadth first (a state's link is shallower,
// so its longest value is final when the state's is computed).
func (a *automaton) link() {
	queue := append([]int32(nil), a.kids[0]...)
	byteOf := make(map[int32]byte, len(a.fail))
	for k, c := range a.edges {
		byteOf[c] = byte(k)
	}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, v := range a.kids[u] {
			b := byteOf[v]
			f := a.fail[u]
			for {
				if c, ok := a.edges[uint64(f)<<8|uint64(b)]; ok && u != 0 {
					a.fail[v] = c
					break
				}
				if f == 0 {
					break
				}
				f = a.fail[f]
			}
			a.longest[v] = max(a.longest[v], a.longest[a.fail[v]])
			queue = append(queue, v)
		}
	}
}

// find returns the spans [start, end) of text the values cover, merged
// where they overlap or touch, in order.
func (a *automaton) find(text string, work *int) [][2]int {
	var spans [][2]int
	n := int32(0)
	for i := 0; i < len(text); i++ {
		*work++
		k := uint64(text[i])
		for {
			if c, ok := a.edges[uint64(n)<<8|k]; ok {
				n = c
				break
			}
			if n == 0 {
				break
			}
			n = a.fail[n]
			*work++
		}
		if l := int(a.longest[n]); l > 0 {
			start, end := i+1-l, i+1
			for len(spans) > 0 && start <= spans[len(spans)-1][1] {
				start = min(start, spans[len(spans)-1][0])
				spans = spans[:len(spans)-1]
				*work++
			}
			spans = append(spans, [2]int{start, end})
		}
	}
	return spans
}
