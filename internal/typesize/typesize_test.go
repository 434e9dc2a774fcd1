// Package typesize holds a check on the code's shape: the packages it
// lists keep no type with more than maxMethods methods, so that a type
// does one job and a reader sees the design (the rest of a big type's
// work lives in component types it holds in fields). A package joins the
// list once its big types are split.
package typesize

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxMethods is the most methods a type of a listed package may have.
const maxMethods = 30

// bounded are the packages held to maxMethods, relative to the
// repository's root.
var bounded = []string{
	"bench/mockserver",
	"cluster",
	"cmd/mcpvisor",
	"gateway",
	"internal/session",
	"mcpserver",
	"oauth",
}

// TestNoTypeHasMoreThanMaxMethods counts the methods declared on each type
// in the production files of every listed package and fails on a type
// with more than maxMethods.
func TestNoTypeHasMoreThanMaxMethods(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range bounded {
		counts, err := methodCounts(filepath.Join(root, pkg))
		if err != nil {
			t.Fatal(err)
		}
		if len(counts) == 0 {
			t.Fatalf("%s: no methods found; is this the repository?", pkg)
		}
		var over []string
		for typ, n := range counts {
			if n > maxMethods {
				over = append(over, fmt.Sprintf("%s.%s has %d methods (at most %d: split it into parts with one job each)", pkg, typ, n, maxMethods))
			}
		}
		sort.Strings(over)
		for _, o := range over {
			t.Error(o)
		}
	}
}

// methodCounts returns the number of methods declared on each type in the
// non-test Go files of dir.
func methodCounts(dir string) (map[string]int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	counts := map[string]int{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 {
				continue
			}
			if typ := receiverType(fn.Recv.List[0].Type); typ != "" {
				counts[typ]++
			}
		}
	}
	return counts, nil
}

// receiverType returns the name of a method's receiver type: T of T, *T,
// T[P] or *T[P].
func receiverType(x ast.Expr) string {
	for {
		switch e := x.(type) {
		case *ast.StarExpr:
			x = e.X
		case *ast.IndexExpr:
			x = e.X
		case *ast.IndexListExpr:
			x = e.X
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}
