package rawdoc

// yamlTooDeep returns the offset of the first node of a YAML document that
// nests deeper than MaxDepth, or -1. It is a pre-scan, not a parser: it
// follows block structure by the columns where collections start ("- ",
// "? ", "key:"), counts flow brackets, and skips comments, quoted scalars
// and block scalars, in one pass whose stack never exceeds MaxDepth. It may
// misjudge malformed input (which the parser then refuses anyway); the
// converter checks the same bound on the tree, so a document the scan
// underestimates is still refused, only later.
func yamlTooDeep(data []byte) int {
	s := yamlScan{data: data, deep: -1, block: noBlock}
	for i := 0; i < len(data) && s.deep < 0; {
		i = s.nextLine(i)
	}
	return s.deep
}

// nextLine scans the line starting at i, skipping blank and comment lines
// and block scalar content, and returns where the next unscanned line
// starts.
func (s *yamlScan) nextLine(i int) int {
	d := s.data
	end := lineEnd(d, i)
	p := indentEnd(d, i, end)
	switch {
	case p == end || d[p] == '#' || onlySpace(d[p:end]):
	case s.block != noBlock && p-i > s.block: // block scalar content
	default:
		s.block = noBlock
		return s.line(i, p, end)
	}
	return end + 1
}

// noBlock is yamlScan.block outside a block scalar.
const noBlock = -2

// yamlCol is an open block collection: the column it starts at and whether
// it is a sequence (else a mapping).
type yamlCol struct {
	col int
	seq bool
}

type yamlScan struct {
	data  []byte
	stack []yamlCol // open block collections, outermost first
	flow  int       // open flow brackets
	block int       // a block scalar's content is indented more than this
	deep  int       // offset of the first node too deep, or -1
}

// indentEnd returns the offset of the first byte of [i, end) that is not
// a space.
func indentEnd(d []byte, i, end int) int {
	for i < end && d[i] == ' ' {
		i++
	}
	return i
}

// line scans the line [start, end) whose first non-space byte is at p and
// returns where the next unscanned line starts (later than end when a flow
// collection or a quoted scalar continues on the following lines).
func (s *yamlScan) line(start, p, end int) int {
	d := s.data
	if p == start && isDocMarker(d[p:end]) {
		s.stack = s.stack[:0] // a document marker
		return s.node(start, skipSpace(d, p+3, end), end, false)
	}
	if p == start && d[p] == '%' {
		return end + 1 // a directive
	}
	for p < end && isIndicator(d, p, end) {
		s.push(p-start, d[p] == '-', p)
		p = skipSpace(d, p+1, end)
	}
	return s.node(start, p, end, true)
}

// isDocMarker reports whether a line starts with a document marker, "---"
// or "...", alone or followed by a space.
func isDocMarker(l []byte) bool {
	return len(l) >= 3 && (string(l[:3]) == "---" || string(l[:3]) == "...") && (len(l) == 3 || isSpace(l[3]))
}

// isIndicator reports whether d[p] starts a block collection entry: "- ",
// "? " or ": " (or the indicator alone at the line's end).
func isIndicator(d []byte, p, end int) bool {
	return (d[p] == '-' || d[p] == '?' || d[p] == ':') && spaceAfter(d, p, end)
}

// spaceAfter reports whether d[p] is followed by a space or the line's end.
func spaceAfter(d []byte, p, end int) bool { return p+1 == end || isSpace(d[p+1]) }

// node scans one node starting at p on the line [start, end): a mapping
// key (when key is set) and its value, or a value alone.
func (s *yamlScan) node(start, p, end int, key bool) int {
	d := s.data
	at := p
	p = skipProperties(d, p, end)
	if p >= end || d[p] == '#' {
		return end + 1
	}
	if d[p] == '|' || d[p] == '>' {
		s.startBlockScalar()
		return end + 1
	}
	q := s.valueEnd(p, end)
	if q > end {
		return lineEnd(d, q) + 1 // continued on later lines: not a key
	}
	q = skipSpace(d, q, end)
	if key && isMappingColon(d, q, end) {
		s.push(at-start, false, at)
		return s.node(start, skipSpace(d, q+1, end), end, false)
	}
	return end + 1
}

// isMappingColon reports whether a ": " (or a final ":") is at q, making
// what precedes it a mapping key.
func isMappingColon(d []byte, q, end int) bool {
	return q < end && d[q] == ':' && spaceAfter(d, q, end)
}

// skipProperties skips the anchors and tags at p.
func skipProperties(d []byte, p, end int) int {
	for p < end && (d[p] == '&' || d[p] == '!') {
		for p < end && !isSpace(d[p]) {
			p++
		}
		p = skipSpace(d, p, end)
	}
	return p
}

// startBlockScalar notes a block scalar: its content is the lines
// indented more than the innermost open collection.
func (s *yamlScan) startBlockScalar() {
	s.block = -1
	if n := len(s.stack); n > 0 {
		s.block = s.stack[n-1].col
	}
}

// valueEnd returns the offset just after the flow collection, quoted
// scalar or plain scalar at p.
func (s *yamlScan) valueEnd(p, end int) int {
	switch s.data[p] {
	case '[', '{':
		return s.flowEnd(p)
	case '"', '\'':
		return quotedEnd(s.data, p)
	}
	return plainEnd(s.data, p, end)
}

// push records a block collection starting at col: a sibling of the open
// one at that column, or nested in it (a sequence under a mapping key may
// start at the key's column).
func (s *yamlScan) push(col int, seq bool, at int) {
	if s.popTo(col, seq) {
		return
	}
	if len(s.stack)+s.flow >= MaxDepth {
		s.tooDeep(at)
		return
	}
	s.stack = append(s.stack, yamlCol{col: col, seq: seq})
}

// popTo closes the open collections a new one at col ends, and reports
// whether the innermost one left is that same collection (a sibling entry).
func (s *yamlScan) popTo(col int, seq bool) bool {
	for n := len(s.stack); n > 0; n = len(s.stack) {
		top := s.stack[n-1]
		if !top.closedBy(col, seq) {
			return top.col == col && top.seq == seq
		}
		s.stack = s.stack[:n-1]
	}
	return false
}

// closedBy reports whether an entry at col ends collection c: c is
// indented deeper, or c is a sequence at col and the entry a mapping key.
func (c yamlCol) closedBy(col int, seq bool) bool {
	return c.col > col || (c.col == col && c.seq && !seq)
}

// tooDeep records at as the first node too deep, unless one is already.
func (s *yamlScan) tooDeep(at int) {
	if s.deep < 0 {
		s.deep = at
	}
}

// flowEnd returns the offset just after the flow collection opening at p.
func (s *yamlScan) flowEnd(p int) int {
	d := s.data
	for i := p; i < len(d); i++ {
		switch d[i] {
		case '[', '{':
			if !s.openFlow(i) {
				return len(d)
			}
		case ']', '}':
			s.flow--
			if s.flow == 0 {
				return i + 1
			}
		default:
			i = skipInert(d, i)
		}
	}
	return len(d)
}

// openFlow counts a flow bracket opening at i and reports whether the
// nesting is still within MaxDepth.
func (s *yamlScan) openFlow(i int) bool {
	s.flow++
	if len(s.stack)+s.flow > MaxDepth {
		s.tooDeep(i)
		return false
	}
	return true
}

// skipInert returns the offset of the last byte of the quoted scalar or
// comment starting at i (i > 0) inside a flow collection, or i when none
// starts there.
func skipInert(d []byte, i int) int {
	switch {
	case (d[i] == '"' || d[i] == '\'') && startsToken(d[i-1]):
		return quotedEnd(d, i) - 1
	case d[i] == '#' && (isSpace(d[i-1]) || d[i-1] == '\n'):
		return lineEnd(d, i) - 1
	}
	return i
}

// startsToken reports whether a quote after prev opens a quoted scalar.
func startsToken(prev byte) bool {
	return isSpace(prev) || prev == '\n' || prev == '[' || prev == '{' || prev == ',' || prev == ':'
}

// quotedEnd returns the offset just after the quoted scalar opening at p.
func quotedEnd(d []byte, p int) int {
	q := d[p]
	for i := p + 1; i < len(d); i++ {
		switch {
		case q == '"' && d[i] == '\\':
			i++
		case d[i] == q && q == '\'' && i+1 < len(d) && d[i+1] == '\'':
			i++
		case d[i] == q:
			return i + 1
		}
	}
	return len(d)
}

// plainEnd returns the end of the plain scalar starting at p: before a
// ": " that makes it a key, a " #" comment, or the line's end.
func plainEnd(d []byte, p, end int) int {
	for i := p; i < end; i++ {
		if isMappingColon(d, i, end) || isComment(d, p, i) {
			return i
		}
	}
	return end
}

// isComment reports whether a "#" at i, after a space, starts a comment in
// the scalar that starts at p.
func isComment(d []byte, p, i int) bool { return d[i] == '#' && i > p && isSpace(d[i-1]) }

func lineEnd(d []byte, i int) int {
	for ; i < len(d); i++ {
		if d[i] == '\n' {
			return i
		}
	}
	return len(d)
}

func skipSpace(d []byte, i, end int) int {
	for i < end && isSpace(d[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

func onlySpace(b []byte) bool {
	for _, c := range b {
		if !isSpace(c) {
			return false
		}
	}
	return true
}
