// Package doctest reads the project's Markdown documentation — README.md
// and docs/*.md — for the tests that hold it to the code: its pages, their
// fenced code blocks and the marker comment before each, their headings
// (as GitHub anchors), links and table rows. Test support, not product
// code.
//
// A block's marker is an HTML comment on the line right before its fence:
// <!-- name --> or <!-- name: text -->. The tests give these meanings:
// "fragment" (a deliberate excerpt: not a whole config), "helm-values"
// (a Helm values file named by the text), "helm-install", "curl-2026".
package doctest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Page is one Markdown file of the documentation.
type Page struct {
	// Path is the file's path from the repository root, with forward
	// slashes ("README.md", "docs/limits.md").
	Path string
	// Text is its content.
	Text string
}

// Root returns the repository root: the nearest directory at or above the
// working directory that holds go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Pages returns README.md and every docs/*.md page, README first, then the
// pages by name.
func Pages() ([]Page, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	names = append([]string{filepath.Join(root, "README.md")}, names...)
	out := make([]Page, 0, len(names))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(root, n)
		if err != nil {
			return nil, err
		}
		out = append(out, Page{Path: filepath.ToSlash(rel), Text: string(b)})
	}
	return out, nil
}

// Load returns the page at path (from the repository root).
func Load(path string) (Page, error) {
	pages, err := Pages()
	if err != nil {
		return Page{}, err
	}
	for _, p := range pages {
		if p.Path == path {
			return p, nil
		}
	}
	return Page{}, fmt.Errorf("no documentation page %s", path)
}

// Block is one fenced code block.
type Block struct {
	// Page is the page's Path; Line the 1-based line of the opening fence.
	Page string
	Line int
	// Lang is the fence's info string (```json → "json").
	Lang string
	// Marker and MarkerText are the comment before the fence, if any
	// (<!-- fragment: why --> → "fragment", "why").
	Marker, MarkerText string
	// Body is the text between the fences, each line ending in "\n".
	Body string
}

// Where names the block for a test failure: page:line (lang).
func (b Block) Where() string { return fmt.Sprintf("%s:%d (```%s)", b.Page, b.Line, b.Lang) }

var markerRE = regexp.MustCompile(`^<!--\s*([a-z0-9-]+)\s*(?::\s*(.*?))?\s*-->$`)

// Blocks returns the page's fenced code blocks in order. A fence is a line
// that starts with ``` (after indentation); the block ends at the next
// line that is only ```.
func (p Page) Blocks() []Block {
	var out []Block
	lines := strings.Split(p.Text, "\n")
	for i := 0; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(t, "```") || strings.HasPrefix(t, "````") {
			continue
		}
		b := Block{Page: p.Path, Line: i + 1, Lang: strings.TrimSpace(strings.TrimPrefix(t, "```"))}
		if i > 0 {
			if m := markerRE.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				b.Marker, b.MarkerText = m[1], m[2]
			}
		}
		var body strings.Builder
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body.WriteString(lines[i] + "\n")
		}
		b.Body = body.String()
		out = append(out, b)
	}
	return out
}

// Prose returns the page's text outside fenced code blocks, with inline
// code spans blanked, line for line (so line numbers still match).
func (p Page) Prose() []string {
	lines := strings.Split(p.Text, "\n")
	out := make([]string, len(lines))
	fenced := false
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") && !strings.HasPrefix(t, "````") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out[i] = blankCode(l)
		}
	}
	return out
}

// blankCode replaces every inline code span of line (text between runs of
// equally many backticks) with spaces.
func blankCode(line string) string {
	b := []byte(line)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := 0
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		closer := strings.Index(string(b[i+n:]), strings.Repeat("`", n))
		if closer < 0 {
			i += n
			continue
		}
		end := i + n + closer + n
		for j := i; j < end; j++ {
			b[j] = ' '
		}
		i = end
	}
	return string(b)
}

// Heading is one ATX heading (#, ##, …) outside code blocks.
type Heading struct {
	Level int
	Text  string
	// Anchor is GitHub's anchor for it, with -1, -2, … for repeats.
	Anchor string
	Line   int
}

// Headings returns the page's headings in order.
func (p Page) Headings() []Heading {
	var out []Heading
	seen := map[string]int{}
	lines := strings.Split(p.Text, "\n")
	fenced := false
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") && !strings.HasPrefix(t, "````") {
			fenced = !fenced
			continue
		}
		level := len(l) - len(strings.TrimLeft(l, "#"))
		if fenced || level == 0 || level > 6 || !strings.HasPrefix(l[level:], " ") {
			continue
		}
		text := strings.TrimSpace(l[level:])
		a := Slug(text)
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out = append(out, Heading{Level: level, Text: text, Anchor: a, Line: i + 1})
	}
	return out
}

// Anchors returns the set of anchors a link may name on the page: its
// headings' and those of explicit <a id="…"> or name="…" tags.
func (p Page) Anchors() map[string]bool {
	out := map[string]bool{}
	for _, h := range p.Headings() {
		out[h.Anchor] = true
	}
	for _, m := range regexp.MustCompile(`<a (?:id|name)="([^"]+)"`).FindAllStringSubmatch(p.Text, -1) {
		out[m[1]] = true
	}
	return out
}

// Slug is GitHub's anchor of a heading's text: lower case, every character
// that is not a letter, digit, space, '-' or '_' dropped, spaces as '-'.
func Slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Link is one inline Markdown link [text](target) outside code.
type Link struct {
	Target string
	Line   int
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Links returns the page's inline links outside code blocks and code
// spans.
func (p Page) Links() []Link {
	var out []Link
	for i, l := range p.Prose() {
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			out = append(out, Link{Target: m[1], Line: i + 1})
		}
	}
	return out
}

// Row is one table row: its cells (trimmed, with "\|" kept as written)
// and line.
type Row struct {
	Cells []string
	Line  int
}

// Rows returns the page's table rows outside code blocks, separator rows
// (|---|) left out.
func (p Page) Rows() []Row {
	var out []Row
	lines := strings.Split(p.Text, "\n")
	fenced := false
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") && !strings.HasPrefix(t, "````") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(t, "|") || strings.Trim(t, "|-: ") == "" {
			continue
		}
		out = append(out, Row{Cells: splitRow(t), Line: i + 1})
	}
	return out
}

// splitRow splits a table line on the pipes that are not escaped.
func splitRow(t string) []string {
	t = strings.TrimSuffix(strings.TrimPrefix(t, "|"), "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(t); i++ {
		switch {
		case t[i] == '\\' && i+1 < len(t) && t[i+1] == '|':
			cur.WriteString(`\|`)
			i++
		case t[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(t[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// StripLineComments removes // comments outside JSON strings, for the
// jsonc blocks (JSON with comments).
func StripLineComments(jsonc string) string {
	var out strings.Builder
	for _, line := range strings.SplitAfter(jsonc, "\n") {
		out.WriteString(stripLine(line))
	}
	return out.String()
}

// stripLine cuts one line at a // that is not inside a string, keeping its
// line break.
func stripLine(line string) string {
	in := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && c == '/' && i+1 < len(line) && line[i+1] == '/':
			if strings.HasSuffix(line, "\n") {
				return strings.TrimRight(line[:i], " \t") + "\n"
			}
			return strings.TrimRight(line[:i], " \t")
		}
	}
	return line
}
