package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Targets are the shape limits of DESIGN §1.
type Targets struct {
	MaxPackageLines int     // non-test lines of one package, comments and blanks included
	MaxMethods      int     // methods of one type
	MaxComplexity   int     // cyclomatic complexity of one function
	MaxAverage      float64 // average cyclomatic complexity over all functions
}

// DefaultTargets are the limits issue 18 set.
var DefaultTargets = Targets{MaxPackageLines: 3500, MaxMethods: 40, MaxComplexity: 25, MaxAverage: 4.0}

// Func is one function or method and its cyclomatic complexity.
type Func struct {
	Pkg, Name, Pos string
	Complexity     int
}

// Figures are the measured shape of a tree.
type Figures struct {
	Lines     map[string]int // package dir → lines
	Methods   map[string]int // "pkg.Type" → methods
	Funcs     []Func
	Forbidden []string // imports the layout forbids, as "file imports path"
}

// forbidden lists, per importing package dir, the import paths it must not use.
var forbidden = map[string][]string{
	"internal/api": {"github.com/mcp-mux/mcp-mux/internal/proxy"},
}

// Measure walks root's product code.
func Measure(root string) (*Figures, error) {
	f := &Figures{Lines: map[string]int{}, Methods: map[string]int{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			return skipDir(rel, d.Name())
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		return f.add(fset, path, filepath.ToSlash(filepath.Dir(rel)))
	})
	return f, err
}

// skipDir leaves out what is not product code.
func skipDir(rel, name string) error {
	switch {
	case rel == "bench", rel == "internal/mcptest", rel == "node_modules":
		return filepath.SkipDir
	case rel != "." && (strings.HasPrefix(name, ".") || name == "testdata"):
		return filepath.SkipDir
	}
	return nil
}

// add measures one file of package dir pkg.
func (f *Figures) add(fset *token.FileSet, path, pkg string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	f.Lines[pkg] += bytes.Count(src, []byte{'\n'})
	file, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	for _, imp := range file.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		for _, bad := range forbidden[pkg] {
			if p == bad {
				f.Forbidden = append(f.Forbidden, path+" imports "+p)
			}
		}
	}
	if !strings.HasPrefix(pkg, "internal/wire") {
		f.Forbidden = append(f.Forbidden, envelopes(fset, file)...)
	}
	for _, d := range file.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := fn.Name.Name
		if t := receiver(fn); t != "" {
			f.Methods[pkg+"."+t]++
			name = "(" + t + ")." + name
		}
		f.Funcs = append(f.Funcs, Func{Pkg: pkg, Name: name, Pos: fset.Position(fn.Pos()).String(), Complexity: complexity(fn)})
	}
	return nil
}

// envelopes finds string literals that spell a JSON-RPC envelope: only
// internal/wire writes them.
func envelopes(fset *token.FileSet, file *ast.File) []string {
	var out []string
	ast.Inspect(file, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if ok && lit.Kind == token.STRING && (strings.Contains(lit.Value, `"jsonrpc":`) || strings.Contains(lit.Value, `\"jsonrpc\":`)) {
			out = append(out, fset.Position(lit.Pos()).String()+" writes a JSON-RPC envelope outside internal/wire")
		}
		return true
	})
	return out
}

// receiver names a method's receiver type, or "" for a function.
func receiver(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return ""
	}
	t := fn.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// complexity is gocyclo's count: one, plus one for each if, for, range,
// non-default case, non-default select case, && and ||, closures included.
func complexity(fn *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fn, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if x.List != nil {
				c++
			}
		case *ast.CommClause:
			if x.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if x.Op == token.LAND || x.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

// Average is the mean complexity over all functions.
func (f *Figures) Average() float64 {
	if len(f.Funcs) == 0 {
		return 0
	}
	sum := 0
	for _, fn := range f.Funcs {
		sum += fn.Complexity
	}
	return float64(sum) / float64(len(f.Funcs))
}

// Misses lists every target the figures miss.
func (f *Figures) Misses(t Targets) []string {
	var out []string
	for pkg, n := range f.Lines {
		if n > t.MaxPackageLines {
			out = append(out, fmt.Sprintf("package %s has %d lines (target %d)", pkg, n, t.MaxPackageLines))
		}
	}
	for typ, n := range f.Methods {
		if n > t.MaxMethods {
			out = append(out, fmt.Sprintf("type %s has %d methods (target %d)", typ, n, t.MaxMethods))
		}
	}
	for _, fn := range f.Funcs {
		if fn.Complexity > t.MaxComplexity {
			out = append(out, fmt.Sprintf("%s %s has cyclomatic complexity %d (target %d)", fn.Pkg, fn.Name, fn.Complexity, t.MaxComplexity))
		}
	}
	if a := f.Average(); a > t.MaxAverage {
		out = append(out, fmt.Sprintf("average cyclomatic complexity is %.2f (target %.1f)", a, t.MaxAverage))
	}
	out = append(out, f.Forbidden...)
	return out
}
