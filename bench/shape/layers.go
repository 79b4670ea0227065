package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Architecture is the file whose package table and Imports list the
// layering checks read, relative to the module root.
const Architecture = "ARCHITECTURE.md"

// Layers is ARCHITECTURE.md's package table: its names in reading order,
// rows top to bottom and, in a row, left to right. A package imports only
// packages named after it.
type Layers struct {
	Order []string       // names in reading order; a name may repeat
	rank  map[string]int // name → its first index in Order
}

// tableRow is one row of the package table and the names in its first cell.
var (
	tableRow = regexp.MustCompile("^\\|([^|]*`[^|]*)\\|")
	codeSpan = regexp.MustCompile("`([^`]+)`")
)

// ParseLayers reads the package table of the "## Packages" section of an
// ARCHITECTURE.md: each row's first cell names its packages in backquotes.
func ParseLayers(md []byte) (*Layers, error) {
	sec, ok := section(string(md), "## Packages")
	if !ok {
		return nil, fmt.Errorf("%s: no \"## Packages\" section", Architecture)
	}
	l := &Layers{rank: map[string]int{}}
	for _, line := range strings.Split(sec, "\n") {
		m := tableRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, n := range codeSpan.FindAllStringSubmatch(m[1], -1) {
			if _, seen := l.rank[n[1]]; !seen {
				l.rank[n[1]] = len(l.Order)
			}
			l.Order = append(l.Order, n[1])
		}
	}
	if len(l.Order) == 0 {
		return nil, fmt.Errorf("%s: the \"## Packages\" section has no table rows", Architecture)
	}
	return l, nil
}

// section returns the text under heading, up to the next "## " heading.
func section(md, heading string) (string, bool) {
	i := strings.Index(md, "\n"+heading+"\n")
	if i < 0 {
		return "", false
	}
	rest := md[i+len(heading)+2:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j+1]
	}
	return rest, true
}

// Layering lists every way the figures' imports break the table: a
// product package missing from it or named twice, a name that is no
// package, an import of a package named above (or at) the importer, and
// an import of support code.
func (f *Figures) Layering(l *Layers) []string {
	var out []string
	count := map[string]int{}
	for _, n := range l.Order {
		count[n]++
	}
	for _, n := range sortedKeys(count) {
		switch {
		case count[n] > 1:
			out = append(out, fmt.Sprintf("%s names %s %d times", Architecture, n, count[n]))
		case !f.isPackage(n) && !isSupport(strings.TrimSuffix(n, "/*")):
			out = append(out, fmt.Sprintf("%s names %s, which is no product package", Architecture, n))
		}
	}
	for _, pkg := range sortedKeys(f.Lines) {
		if _, ok := l.rank[pkg]; !ok {
			out = append(out, fmt.Sprintf("package %s is not in %s's package table", pkg, Architecture))
			continue
		}
		out = append(out, f.upward(l, pkg)...)
	}
	return out
}

// isPackage reports whether dir is a measured product package.
func (f *Figures) isPackage(dir string) bool {
	_, ok := f.Lines[dir]
	return ok
}

// upward lists pkg's imports the table forbids.
func (f *Figures) upward(l *Layers, pkg string) []string {
	var out []string
	for _, dep := range sortedKeys(f.Imports[pkg]) {
		r, listed := l.rank[dep]
		switch {
		case isSupport(dep):
			out = append(out, fmt.Sprintf("%s imports %s, which is test support", pkg, dep))
		case listed && r <= l.rank[pkg]:
			out = append(out, fmt.Sprintf("%s imports %s, which %s names above it", pkg, dep, Architecture))
		}
	}
	return out
}

// ImportsList is the Imports section's list: every product package, one
// line each, with the product packages it imports.
func (f *Figures) ImportsList() string {
	var b strings.Builder
	b.WriteString("```text\n")
	for _, pkg := range sortedKeys(f.Lines) {
		deps := sortedKeys(f.Imports[pkg])
		if len(deps) == 0 {
			deps = []string{"(none)"}
		}
		fmt.Fprintf(&b, "%s → %s\n", pkg, strings.Join(deps, ", "))
	}
	b.WriteString("```\n")
	return b.String()
}

// importsBlock is the fenced list under "## Imports".
var importsBlock = regexp.MustCompile("(?s)```text\n.*?```\n")

// DocumentedImports returns the list under md's "## Imports" heading.
func DocumentedImports(md []byte) (string, error) {
	sec, ok := section(string(md), "## Imports")
	if !ok {
		return "", fmt.Errorf("%s: no \"## Imports\" section", Architecture)
	}
	block := importsBlock.FindString(sec)
	if block == "" {
		return "", fmt.Errorf("%s: the \"## Imports\" section has no ```text list", Architecture)
	}
	return block, nil
}

// WriteImports replaces the list under the "## Imports" heading of root's
// ARCHITECTURE.md with the figures' one.
func (f *Figures) WriteImports(root string) error {
	path := filepath.Join(root, Architecture)
	md, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", Architecture, err)
	}
	old, err := DocumentedImports(md)
	if err != nil {
		return err
	}
	start := bytes.Index(md, []byte("\n## Imports\n"))
	at := start + bytes.Index(md[start:], []byte(old))
	out := append(append(append([]byte(nil), md[:at]...), f.ImportsList()...), md[at+len(old):]...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", Architecture, err)
	}
	return nil
}

// CheckArchitecture lists how root's ARCHITECTURE.md and the figures
// disagree: the table's layering and the Imports list.
func (f *Figures) CheckArchitecture(root string) ([]string, error) {
	md, err := os.ReadFile(filepath.Join(root, Architecture))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", Architecture, err)
	}
	l, err := ParseLayers(md)
	if err != nil {
		return nil, err
	}
	out := f.Layering(l)
	doc, err := DocumentedImports(md)
	if err != nil {
		return nil, err
	}
	if doc != f.ImportsList() {
		out = append(out, fmt.Sprintf("%s's Imports list differs from the code's imports (go run ./bench/shape -imports -w)", Architecture))
	}
	return out, nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
