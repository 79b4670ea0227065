package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const table = `# x

## Packages

| package | what it provides |
|---|---|
| ` + "`cmd/x`" + ` | the CLI. |
| ` + "`internal/a`" + ` | a; mentions ` + "`b`" + ` only in prose. |
| ` + "`internal/b`, `internal/c`" + ` | b and c. |
| ` + "`internal/gone`" + ` | a package that is no more. |
| ` + "`internal/mcptest`, `bench/*`" + ` | support. |

## Imports

` + "```text\n```" + `
`

// A tree whose imports break the table every way Layering reports.
func layeredTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	imp := func(pkg string, deps ...string) string {
		src := "package " + filepath.Base(pkg) + "\n\nimport (\n"
		for _, d := range deps {
			src += "\t_ \"" + module + "/" + d + "\"\n"
		}
		return src + ")\n"
	}
	write(t, root, "cmd/x/main.go", imp("main", "internal/a", "internal/c")) // down: fine
	write(t, root, "internal/a/a.go", imp("a", "internal/b"))                // down: fine
	write(t, root, "internal/a/a_test.go", imp("a", "cmd/x"))                // a test: not counted
	write(t, root, "internal/b/b.go", imp("b", "internal/c"))                // same row, to its right: fine
	write(t, root, "internal/c/c.go", imp("c", "internal/a", "internal/b"))  // up, and left in its row
	write(t, root, "internal/d/d.go", imp("d", "internal/mcptest"))          // not in the table; imports support
	write(t, root, "internal/mcptest/m.go", imp("mcptest", "cmd/x"))         // support: not layered
	write(t, root, "bench/y/y.go", imp("y", "cmd/x"))
	write(t, root, Architecture, table)
	return root
}

func TestParseLayers(t *testing.T) {
	l, err := ParseLayers([]byte(table))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"cmd/x", "internal/a", "internal/b", "internal/c", "internal/gone", "internal/mcptest", "bench/*"}
	if !reflect.DeepEqual(l.Order, want) {
		t.Fatalf("order %q, want %q", l.Order, want)
	}
	if _, err := ParseLayers([]byte("# x\n\n## Other\n")); err == nil {
		t.Fatal("no Packages section: want an error")
	}
}

func TestLayering(t *testing.T) {
	root := layeredTree(t)
	f, err := Measure(root)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParseLayers([]byte(table))
	if err != nil {
		t.Fatal(err)
	}
	got := f.Layering(l)
	want := []string{
		"ARCHITECTURE.md names internal/gone, which is no product package",
		"internal/c imports internal/a, which ARCHITECTURE.md names above it",
		"internal/c imports internal/b, which ARCHITECTURE.md names above it",
		"package internal/d is not in ARCHITECTURE.md's package table",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("layering:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Named twice; d listed, so its support import shows.
	twice := strings.Replace(table, "| `internal/gone` |", "| `internal/d`, `internal/a` |", 1)
	if l, err = ParseLayers([]byte(twice)); err != nil {
		t.Fatal(err)
	}
	got = f.Layering(l)
	want = []string{
		"ARCHITECTURE.md names internal/a 2 times",
		"internal/c imports internal/a, which ARCHITECTURE.md names above it",
		"internal/c imports internal/b, which ARCHITECTURE.md names above it",
		"internal/d imports internal/mcptest, which is test support",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("layering:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestImportsList(t *testing.T) {
	root := layeredTree(t)
	f, err := Measure(root)
	if err != nil {
		t.Fatal(err)
	}
	want := "```text\n" +
		"cmd/x → internal/a, internal/c\n" +
		"internal/a → internal/b\n" +
		"internal/b → internal/c\n" +
		"internal/c → internal/a, internal/b\n" +
		"internal/d → internal/mcptest\n" +
		"```\n"
	if got := f.ImportsList(); got != want {
		t.Fatalf("imports list:\n%s\nwant:\n%s", got, want)
	}
	if misses, err := f.CheckArchitecture(root); err != nil || !strings.Contains(strings.Join(misses, "\n"), "Imports list differs") {
		t.Fatalf("stale list: misses %q, err %v", misses, err)
	}
	if err := f.WriteImports(root); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(root, Architecture))
	if doc, err := DocumentedImports(md); err != nil || doc != want {
		t.Fatalf("written list %q, err %v", doc, err)
	}
	if misses, _ := f.CheckArchitecture(root); strings.Contains(strings.Join(misses, "\n"), "Imports list differs") {
		t.Fatalf("after -w the list still differs: %q", misses)
	}
}

// architecture measures the module and reads its ARCHITECTURE.md.
func architecture(t *testing.T) (*Figures, []byte) {
	t.Helper()
	root := filepath.Join("..", "..")
	f, err := Measure(root)
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(root, Architecture))
	if err != nil {
		t.Fatal(err)
	}
	return f, md
}

// Every product package is in ARCHITECTURE.md's table, once, and imports
// only packages named below it.
func TestArchitectureLayers(t *testing.T) {
	f, md := architecture(t)
	l, err := ParseLayers(md)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Order) < 40 || f.Imports["internal/proxy"]["internal/proxy/callpath"] != true {
		t.Fatalf("%d names in the table, proxy's imports %v: not the module root?", len(l.Order), f.Imports["internal/proxy"])
	}
	for _, m := range f.Layering(l) {
		t.Error(m)
	}
}

// ARCHITECTURE.md's Imports list is every import between product packages.
func TestArchitectureImports(t *testing.T) {
	f, md := architecture(t)
	doc, err := DocumentedImports(md)
	if err != nil {
		t.Fatal(err)
	}
	if want := f.ImportsList(); doc != want {
		t.Errorf("ARCHITECTURE.md's Imports list differs from the code's (go run ./bench/shape -imports -w)\nlisted only:\n%s\nin the code only:\n%s",
			strings.Join(linesOnly(doc, want), "\n"), strings.Join(linesOnly(want, doc), "\n"))
	}
}

// linesOnly returns the lines of a that b lacks.
func linesOnly(a, b string) []string {
	in := map[string]bool{}
	for _, l := range strings.Split(b, "\n") {
		in[l] = true
	}
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !in[l] {
			out = append(out, l)
		}
	}
	return out
}
