package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `package x

type T struct{}

func (t *T) A() {}
func (t T) B()  {}

func f(a, b bool, xs []int) int {
	if a && b || !a { // if, &&, ||
		return 1
	}
	for range xs { // range
	}
	switch {
	case a: // case
	default:
	}
	g := func() {
		for i := 0; i < 2; i++ { // closure's for counts too
		}
	}
	g()
	return 0
}

const env = ` + "`" + `{"jsonrpc":"2.0","id":1}` + "`" + `
`

func write(t *testing.T, root, rel, src string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMeasure(t *testing.T) {
	root := t.TempDir()
	write(t, root, "x/x.go", sample)
	write(t, root, "x/x_test.go", "package x\n\nfunc g() { if true {} }\n")
	write(t, root, "bench/b/b.go", "package b\n\nfunc h() {}\n")
	write(t, root, "examples/e/e.go", "package e\n\nfunc h() {}\n")
	write(t, root, "internal/otlptest/o.go", "package otlptest\n\nfunc h() {}\n")
	write(t, root, "internal/api/a.go", "package api\n\nimport _ \"github.com/mcp-mux/mcp-mux/internal/proxy\"\n")
	write(t, root, "internal/wire/w.go", "package wire\n\nconst e = `{\"jsonrpc\":\"2.0\"}`\n")
	f, err := Measure(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Funcs) != 3 {
		t.Fatalf("functions %v: test files and support code must not count", f.Funcs)
	}
	for _, fn := range f.Funcs {
		if fn.Name == "f" && fn.Complexity != 7 {
			t.Fatalf("complexity of f = %d, want 7", fn.Complexity)
		}
	}
	if f.Methods["x.T"] != 2 || f.Lines["x"] != strings.Count(sample, "\n") {
		t.Fatalf("methods %v lines %v", f.Methods, f.Lines)
	}
	if len(f.Forbidden) != 2 {
		t.Fatalf("forbidden %q: want api's proxy import and x's envelope", f.Forbidden)
	}
	misses := f.Misses(Targets{MaxMethods: 1, MaxComplexity: 6, MaxAverage: 2})
	if len(misses) != 5 {
		t.Fatalf("misses %q", misses)
	}
}

// The module itself keeps DESIGN §1's shape targets: every later change is
// measured against them here, not only in a closing note.
func TestRepositoryShape(t *testing.T) {
	f, err := Measure(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Funcs) < 1000 || f.Lines["internal/proxy"] == 0 {
		t.Fatalf("measured %d functions, proxy %d lines: not the module root?", len(f.Funcs), f.Lines["internal/proxy"])
	}
	for _, m := range f.Misses(DefaultTargets) {
		t.Error(m)
	}
}
