package mcpvisor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// typeDecls returns the type declarations of the non-test files of the
// package in dir, by name, with where each is.
func typeDecls(t *testing.T, dir string) map[string]*ast.TypeSpec {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	out := map[string]*ast.TypeSpec{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			if gen, ok := decl.(*ast.GenDecl); ok && gen.Tok == token.TYPE {
				for _, spec := range gen.Specs {
					ts := spec.(*ast.TypeSpec)
					out[ts.Name.Name] = ts
				}
			}
		}
	}
	return out
}

// The root package declares no alias types: every type a host meets is
// either declared here, with its fields and docs in go doc, or named
// directly from the small public package that owns it (protocol,
// transports, oauth, channels, sandbox).
func TestRootDeclaresNoAliasTypes(t *testing.T) {
	var aliases []string
	for name, ts := range typeDecls(t, ".") {
		if ts.Assign.IsValid() {
			aliases = append(aliases, name)
		}
	}
	assert.Empty(t, aliases, "alias types in the root package")
}

// Every type a host sees is declared once, in the root: package actors,
// the actor machinery beneath it, declares none of the root's type names
// (it once held 37 twins of them, and a conversion layer between).
func TestActorsDeclaresNoTwinOfARootType(t *testing.T) {
	root := typeDecls(t, ".")
	var twins []string
	for name := range typeDecls(t, "actors") {
		if _, ok := root[name]; ok && ast.IsExported(name) {
			twins = append(twins, name)
		}
	}
	assert.Empty(t, twins, "types declared both in the root and in actors")
}
