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

// Targets are the shape limits of DESIGN §1. A package's size has no cap
// (issue 33): review judges it.
type Targets struct {
	MaxMethods    int     // methods of one type
	MaxComplexity int     // cyclomatic complexity of one function
	MaxAverage    float64 // average cyclomatic complexity over all functions
}

// DefaultTargets are the limits issue 18 set.
var DefaultTargets = Targets{MaxMethods: 40, MaxComplexity: 25, MaxAverage: 4.0}

// module is the import path of the module measured.
const module = "github.com/mcp-mux/mcp-mux"

// support are the trees of test and measurement support: not product
// code, so neither measured nor layered (ARCHITECTURE.md's last row).
var support = []string{"bench", "examples", "internal/mcptest", "internal/otlptest", "internal/nodeclients", "internal/oauthtest", "internal/conformance", "internal/replicaset", "internal/doctest"}

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
	Forbidden []string                   // imports the layout forbids, as "file imports path"
	Imports   map[string]map[string]bool // package dir → dirs of the module's packages it imports
}

// forbidden lists, per importing package dir, the import paths it must not use.
var forbidden = map[string][]string{
	"internal/api": {module + "/internal/proxy"},
}

// Measure walks root's product code: its non-test files outside support.
func Measure(root string) (*Figures, error) {
	f := &Figures{Lines: map[string]int{}, Methods: map[string]int{}, Imports: map[string]map[string]bool{}}
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
	rel = filepath.ToSlash(rel)
	switch {
	case isSupport(rel), name == "node_modules":
		return filepath.SkipDir
	case rel != "." && (strings.HasPrefix(name, ".") || name == "testdata"):
		return filepath.SkipDir
	}
	return nil
}

// isSupport reports whether dir is in a support tree.
func isSupport(dir string) bool {
	for _, s := range support {
		if dir == s || strings.HasPrefix(dir, s+"/") {
			return true
		}
	}
	return false
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
	f.addImports(path, pkg, file)
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

// addImports records file's imports of the module's packages and any the
// layout forbids.
func (f *Figures) addImports(path, pkg string, file *ast.File) {
	if f.Imports[pkg] == nil {
		f.Imports[pkg] = map[string]bool{}
	}
	for _, imp := range file.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		for _, bad := range forbidden[pkg] {
			if p == bad {
				f.Forbidden = append(f.Forbidden, path+" imports "+p)
			}
		}
		if dir, ok := strings.CutPrefix(p, module+"/"); ok && dir != pkg {
			f.Imports[pkg][dir] = true
		}
	}
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
