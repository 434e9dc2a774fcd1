// Package seams holds a check on the repository's tests: they change
// production code's behaviour only through its API (options, injected
// clocks, testing/synctest), never by rewriting its package-level
// variables (test hooks, timing knobs).
package seams

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestTestsDoNotRewriteProductionVariables reads every package of the
// repository and fails on a test file that assigns to a package-level
// variable declared in the package's production files: such a variable is
// a test hook or a timing knob that a host cannot see and that makes
// tests of one package unable to run in parallel.
func TestTestsDoNotRewriteProductionVariables(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".deps", ".git", "node_modules", "bin", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			dirs[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 20 {
		t.Fatalf("found %d Go packages under %s; is this the repository?", len(dirs), root)
	}
	var found []string
	for dir := range dirs {
		found = append(found, rewrites(t, dir)...)
	}
	sort.Strings(found)
	for _, f := range found {
		t.Error(f)
	}
}

// rewrites lists the assignments in dir's test files (of the same
// package) to package-level variables of dir's production files.
func rewrites(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	vars := map[string]bool{}
	var tests []*ast.File
	var pkg string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, "_test.go") {
			tests = append(tests, f)
			continue
		}
		pkg = f.Name.Name
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if n.Name != "_" {
						vars[n.Name] = true
					}
				}
			}
		}
	}
	var out []string
	for _, f := range tests {
		if f.Name.Name != pkg {
			continue // an external test package sees only exported names, through the package's name
		}
		ast.Inspect(f, func(n ast.Node) bool {
			as, ok := n.(*ast.AssignStmt)
			if !ok || as.Tok == token.DEFINE {
				return true
			}
			for _, lhs := range as.Lhs {
				if id, ok := lhs.(*ast.Ident); ok && vars[id.Name] && !declaredLocally(f, id) {
					out = append(out, fset.Position(id.Pos()).String()+": a test assigns the production variable "+id.Name)
				}
			}
			return true
		})
	}
	return out
}

// declaredLocally reports whether id's name is declared inside a function
// of f (a local that shadows the package-level variable): a := or a var
// statement, or a parameter, in any function of the file.
func declaredLocally(f *ast.File, id *ast.Ident) bool {
	local := false
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl, *ast.FuncLit:
			var body *ast.BlockStmt
			var params *ast.FieldList
			if fd, ok := n.(*ast.FuncDecl); ok {
				body, params = fd.Body, fd.Type.Params
			} else {
				fl := n.(*ast.FuncLit)
				body, params = fl.Body, fl.Type.Params
			}
			if body == nil || id.Pos() < body.Pos() || id.Pos() > body.End() {
				return true
			}
			for _, p := range params.List {
				for _, name := range p.Names {
					local = local || name.Name == id.Name
				}
			}
			ast.Inspect(body, func(m ast.Node) bool {
				switch m := m.(type) {
				case *ast.AssignStmt:
					if m.Tok == token.DEFINE && m.Pos() < id.Pos() {
						for _, l := range m.Lhs {
							if li, ok := l.(*ast.Ident); ok && li.Name == id.Name {
								local = true
							}
						}
					}
				case *ast.ValueSpec:
					for _, name := range m.Names {
						local = local || (name.Name == id.Name && m.Pos() < id.Pos())
					}
				}
				return true
			})
		}
		return true
	})
	return local
}
