// Command shape prints the shape figures of mcp-mux's non-test product code
// (test and measurement support aside: bench/, examples/, internal/mcptest
// and the others of ARCHITECTURE.md's last row) against the targets of
// DESIGN §1: methods per type, cyclomatic complexity per function
// (gocyclo's count) and its average, the imports the layout forbids, and
// the layering of ARCHITECTURE.md's package table (a package imports only
// packages named below it) and its Imports list. Lines per package are
// shown, not capped. It exits 1 when a target is missed.
//
//	go run ./bench/shape [-root DIR] [-top N]
//	go run ./bench/shape -imports [-w]   # print (or write) the Imports list
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
)

func main() {
	root := flag.String("root", ".", "module root")
	top := flag.Int("top", 8, "rows to print per table")
	imports := flag.Bool("imports", false, "print the Imports list of "+Architecture)
	write := flag.Bool("w", false, "with -imports: write the list into "+Architecture)
	flag.Parse()
	f, err := Measure(*root)
	if err != nil {
		fail(err)
	}
	if *imports {
		if *write {
			err = f.WriteImports(*root)
		} else {
			_, err = fmt.Print(f.ImportsList())
		}
		if err != nil {
			fail(err)
		}
		return
	}
	f.Print(os.Stdout, *top)
	arch, err := f.CheckArchitecture(*root)
	if err != nil {
		fail(err)
	}
	if misses := append(f.Misses(DefaultTargets), arch...); len(misses) > 0 {
		fmt.Println("\nmissed targets:")
		for _, m := range misses {
			fmt.Println("  -", m)
		}
		os.Exit(1)
	}
}

// fail reports err and exits 2.
func fail(err error) {
	fmt.Fprintln(os.Stderr, "shape:", err)
	os.Exit(2)
}

// Print writes the figures' tables, largest first.
func (f *Figures) Print(w io.Writer, top int) {
	fmt.Fprintf(w, "packages %d, functions %d, average cyclomatic %.2f\n", len(f.Lines), len(f.Funcs), f.Average())
	fmt.Fprintln(w, "\nlines per package:")
	for _, kv := range sorted(f.Lines, top) {
		fmt.Fprintf(w, "  %6d  %s\n", kv.n, kv.k)
	}
	fmt.Fprintln(w, "\nmethods per type:")
	for _, kv := range sorted(f.Methods, top) {
		fmt.Fprintf(w, "  %6d  %s\n", kv.n, kv.k)
	}
	fmt.Fprintln(w, "\ncyclomatic complexity:")
	fs := append([]Func(nil), f.Funcs...)
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Complexity > fs[j].Complexity })
	for i := 0; i < top && i < len(fs); i++ {
		fmt.Fprintf(w, "  %6d  %s %s (%s)\n", fs[i].Complexity, fs[i].Pkg, fs[i].Name, fs[i].Pos)
	}
	if len(f.Forbidden) > 0 {
		fmt.Fprintln(w, "\nforbidden imports:")
		for _, s := range f.Forbidden {
			fmt.Fprintln(w, "  ", s)
		}
	}
}

type count struct {
	k string
	n int
}

// sorted returns the top entries of m, largest first.
func sorted(m map[string]int, top int) []count {
	out := make([]count, 0, len(m))
	for k, n := range m {
		out = append(out, count{k, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].n != out[j].n {
			return out[i].n > out[j].n
		}
		return out[i].k < out[j].k
	})
	if len(out) > top {
		out = out[:top]
	}
	return out
}
