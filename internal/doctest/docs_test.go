package doctest

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// pages loads the documentation or fails the test.
func pages(t *testing.T) []Page {
	t.Helper()
	ps, err := Pages()
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) < 2 {
		t.Fatalf("found %d documentation pages; README.md and docs/*.md expected", len(ps))
	}
	return ps
}

// TestReadmeShape: the README stays a front page (issue 39): under 400
// lines, with a contents list that links every one of its sections.
func TestReadmeShape(t *testing.T) {
	readme := pages(t)[0]
	if n := strings.Count(readme.Text, "\n"); n >= 400 {
		t.Errorf("README.md has %d lines; keep it under 400 and move the detail into docs/", n)
	}
	var contents string
	var sections []Heading
	for _, h := range readme.Headings() {
		if h.Level != 2 {
			continue
		}
		if h.Text == "Contents" {
			rest := readme.Text[strings.Index(readme.Text, "\n## Contents\n")+1:]
			rest = rest[strings.Index(rest, "\n")+1:]
			if end := strings.Index(rest, "\n## "); end >= 0 {
				rest = rest[:end]
			}
			contents = rest
			continue
		}
		sections = append(sections, h)
	}
	if contents == "" {
		t.Fatal("README.md has no \"## Contents\" section")
	}
	for _, h := range sections {
		if !strings.Contains(contents, "](#"+h.Anchor+")") {
			t.Errorf("README.md's contents do not link its section %q (#%s)", h.Text, h.Anchor)
		}
	}
}

// TestDocsLinks: every relative link of the README and the docs pages
// names a file of the repository, and every anchor a heading of its page.
func TestDocsLinks(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{} // page path → anchors
	anchorsOf := func(p string) map[string]bool {
		if a, ok := anchors[p]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return nil
		}
		anchors[p] = Page{Path: p, Text: string(b)}.Anchors()
		return anchors[p]
	}
	checked := 0
	for _, pg := range pages(t) {
		for _, l := range pg.Links() {
			if strings.Contains(l.Target, "://") || strings.HasPrefix(l.Target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(l.Target, "#")
			target := pg.Path
			if file != "" {
				target = path.Clean(path.Join(path.Dir(pg.Path), file))
				if strings.HasPrefix(target, "../") {
					t.Errorf("%s:%d: link %s leaves the repository", pg.Path, l.Line, l.Target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
					t.Errorf("%s:%d: link %s: no file %s", pg.Path, l.Line, l.Target, target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: link %s: an anchor into a file that is not Markdown", pg.Path, l.Line, l.Target)
			} else if !anchorsOf(target)[anchor] {
				t.Errorf("%s:%d: link %s: %s has no heading with the anchor #%s", pg.Path, l.Line, l.Target, target, anchor)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d relative links; the scan is broken", checked)
	}
}

// TestDocsTableCells: no table cell is over 300 characters (issue 39: long
// cells are unreadable; the detail belongs in prose under the table).
func TestDocsTableCells(t *testing.T) {
	rows := 0
	for _, pg := range pages(t) {
		for _, r := range pg.Rows() {
			rows++
			for i, c := range r.Cells {
				if n := len([]rune(c)); n > 300 {
					t.Errorf("%s:%d: cell %d is %d characters (at most 300): %.60s…", pg.Path, r.Line, i+1, n, c)
				}
			}
		}
	}
	if rows < 100 {
		t.Fatalf("found only %d table rows; the scan is broken", rows)
	}
}

// testNameRE matches the name of a Go test function.
var testNameRE = regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9_]*`)

// TestDocsNameNoTests: the user pages name no test function; which test
// holds which claim is on the development page.
func TestDocsNameNoTests(t *testing.T) {
	found := false
	for _, pg := range pages(t) {
		for i, l := range strings.Split(pg.Text, "\n") {
			m := testNameRE.FindString(l)
			switch {
			case m == "":
			case pg.Path == "docs/development.md":
				found = true
			default:
				t.Errorf("%s:%d names the test %s: say what is tested, and name the test on docs/development.md", pg.Path, i+1, m)
			}
		}
	}
	if !found {
		t.Error("docs/development.md names no test; the scan is broken")
	}
}

// metricRE matches a Prometheus series name of mcp-mux's own in Go source.
var metricRE = regexp.MustCompile(`"(mcp_mux_[a-z0-9_]*[a-z0-9])"`)

// TestDocsListEveryMetric: every mcp_mux_* series the code registers is
// listed on the observability page.
func TestDocsListEveryMetric(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	obs, err := Load("docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range metricRE.FindAllStringSubmatch(string(b), -1) {
				if !slices.Contains(names, m[1]) {
					names = append(names, m[1])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(names) < 20 {
		t.Fatalf("found %d mcp_mux_* series in the code; the scan is broken", len(names))
	}
	for _, n := range names {
		if !strings.Contains(obs.Text, "`"+n+"`") {
			t.Errorf("the series %s is not listed on docs/observability.md", n)
		}
	}
}

// TestReadmeCommands: the README's two commands are the example's runner
// and exactly the test command CI runs (.ci/run's last go test).
func TestReadmeCommands(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	var ciTest string
	for _, l := range strings.Split(string(ci), "\n") {
		if strings.HasPrefix(l, "go test ") {
			ciTest = l
		}
	}
	if ciTest == "" {
		t.Fatal(".ci/run runs no go test")
	}
	var cmds []string
	for _, b := range pages(t)[0].Blocks() {
		if b.Lang != "sh" {
			continue
		}
		for _, l := range strings.Split(b.Body, "\n") {
			cmd, _, _ := strings.Cut(l, "#")
			cmds = append(cmds, strings.TrimSpace(cmd))
		}
	}
	for _, want := range []string{"./examples/run.sh", ciTest} {
		if !slices.Contains(cmds, want) {
			t.Errorf("the README's commands %q do not include %q", cmds, want)
		}
	}
}
