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
		end := lineEnd(data, i)
		p := i
		for p < end && data[p] == ' ' {
			p++
		}
		switch {
		case p == end || data[p] == '#' || onlySpace(data[p:end]):
		case s.block != noBlock && p-i > s.block: // block scalar content
		default:
			s.block = noBlock
			i = s.line(i, p, end)
			continue
		}
		i = end + 1
	}
	return s.deep
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

// line scans the line [start, end) whose first non-space byte is at p and
// returns where the next unscanned line starts (later than end when a flow
// collection or a quoted scalar continues on the following lines).
func (s *yamlScan) line(start, p, end int) int {
	d := s.data
	if p == start && end-p >= 3 && (string(d[p:p+3]) == "---" || string(d[p:p+3]) == "...") && (end-p == 3 || isSpace(d[p+3])) {
		s.stack = s.stack[:0] // a document marker
		return s.node(start, skipSpace(d, p+3, end), end, false)
	}
	if p == start && d[p] == '%' {
		return end + 1 // a directive
	}
	for p < end && (d[p] == '-' || d[p] == '?' || d[p] == ':') && (p+1 == end || isSpace(d[p+1])) {
		s.push(p-start, d[p] == '-', p)
		p = skipSpace(d, p+1, end)
	}
	return s.node(start, p, end, true)
}

// node scans one node starting at p on the line [start, end): a mapping
// key (when key is set) and its value, or a value alone.
func (s *yamlScan) node(start, p, end int, key bool) int {
	d := s.data
	at := p
	for p < end && (d[p] == '&' || d[p] == '!') { // anchor or tag
		for p < end && !isSpace(d[p]) {
			p++
		}
		p = skipSpace(d, p, end)
	}
	if p >= end || d[p] == '#' {
		return end + 1
	}
	var q int // just after the scalar or flow collection at p
	switch d[p] {
	case '|', '>':
		s.block = -1
		if n := len(s.stack); n > 0 {
			s.block = s.stack[n-1].col
		}
		return end + 1
	case '[', '{':
		q = s.flowEnd(p)
	case '"', '\'':
		q = quotedEnd(d, p)
	default:
		q = plainEnd(d, p, end)
	}
	if q > end {
		return lineEnd(d, q) + 1 // continued on later lines: not a key
	}
	q = skipSpace(d, q, end)
	if key && q < end && d[q] == ':' && (q+1 == end || isSpace(d[q+1])) {
		s.push(at-start, false, at)
		return s.node(start, skipSpace(d, q+1, end), end, false)
	}
	return end + 1
}

// push records a block collection starting at col: a sibling of the open
// one at that column, or nested in it (a sequence under a mapping key may
// start at the key's column).
func (s *yamlScan) push(col int, seq bool, at int) {
	for n := len(s.stack); n > 0; n = len(s.stack) {
		top := s.stack[n-1]
		if top.col > col || (top.col == col && top.seq && !seq) {
			s.stack = s.stack[:n-1]
			continue
		}
		if top.col == col && top.seq == seq {
			return
		}
		break
	}
	if len(s.stack)+s.flow >= MaxDepth {
		s.tooDeep(at)
		return
	}
	s.stack = append(s.stack, yamlCol{col: col, seq: seq})
}

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
			s.flow++
			if len(s.stack)+s.flow > MaxDepth {
				s.tooDeep(i)
				return len(d)
			}
		case ']', '}':
			s.flow--
			if s.flow == 0 {
				return i + 1
			}
		case '"', '\'':
			if prev := d[i-1]; isSpace(prev) || prev == '\n' || prev == '[' || prev == '{' || prev == ',' || prev == ':' {
				i = quotedEnd(d, i) - 1
			}
		case '#':
			if isSpace(d[i-1]) || d[i-1] == '\n' {
				i = lineEnd(d, i) - 1
			}
		}
	}
	return len(d)
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
		if d[i] == ':' && (i+1 == end || isSpace(d[i+1])) {
			return i
		}
		if d[i] == '#' && i > p && isSpace(d[i-1]) {
			return i
		}
	}
	return end
}

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
