// Package typesize holds a check on the code's shape: no package of the
// repository keeps a type with more than maxMethods methods, so that a
// type does one job and a reader sees the design (the rest of a big
// type's work lives in component types it holds in fields).
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

// maxMethods is the most methods a type may have.
const maxMethods = 30

// packages returns the directories under root that hold Go files: every
// package of the module and of the modules nested in it, but for
// testdata, dot-directories and the npm/tool deposit .deps.
func packages(root string) ([]string, error) {
	var dirs []string
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			if dir := filepath.Dir(path); !seen[dir] {
				seen[dir] = true
				dirs = append(dirs, dir)
			}
		}
		return nil
	})
	return dirs, err
}

// TestNoTypeHasMoreThanMaxMethods counts the methods declared on each type
// in the production files of every package and fails on a type with more
// than maxMethods.
func TestNoTypeHasMoreThanMaxMethods(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := packages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 40 {
		t.Fatalf("found %d packages under %s; is this the repository?", len(pkgs), root)
	}
	for _, dir := range pkgs {
		pkg, _ := filepath.Rel(root, dir)
		if pkg == "." {
			pkg = "mcpvisor"
		}
		counts, err := methodCounts(dir)
		if err != nil {
			t.Fatal(err)
		}
		if pkg == "mcpvisor" && counts["Supervisor"] == 0 {
			t.Fatalf("no methods of Supervisor found in %s; is this the repository?", dir)
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
