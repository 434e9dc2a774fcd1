package testwait

import (
	"fmt"
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

// exemptMark, in a comment on the line of a wait or the line above it
// (or in a function's doc comment, for the whole function), says why the
// wait needs no deadline: a goroutine that ends with its stream, a check
// that something does not happen within a while. A reason must follow.
const exemptMark = "testwait:ok"

// TestTestsBoundTheirWaits reads every _test.go file of the repository
// and fails on each wait that has no deadline: a bare channel receive, a
// select with no deadline case and no default, a Wait() (WaitGroup,
// exec.Cmd), a time.Sleep, and the HTTP helpers that use a client
// without a timeout (http.Get, http.DefaultClient). Waits inside a
// goroutine (go func(){...}()), inside a function handed to a testwait
// helper, and in benchmarks are not the test's own and are let through;
// any other needs a testwait helper or an exemptMark comment that says
// why it cannot hang.
func TestTestsBoundTheirWaits(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".deps", ".git", "node_modules", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("found %d test files under %s; is this the repository?", len(files), root)
	}
	var found []string
	for _, path := range files {
		if filepath.Base(filepath.Dir(path)) == "testwait" {
			continue // the helpers themselves, and this test
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		for _, f := range unboundedWaits(t, rel, src) {
			found = append(found, f)
		}
	}
	sort.Strings(found)
	if len(found) > 0 {
		t.Errorf("%d waits without a deadline in tests (bound them with internal/testwait, or say why they cannot hang in a %q comment):\n%s",
			len(found), exemptMark, strings.Join(found, "\n"))
	}
}

// unboundedWaits returns the waits without a deadline in one test file,
// each as "file:line: what".
func unboundedWaits(t testing.TB, name string, src []byte) []string {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		t.Fatalf("parsing %s: %v", name, err)
	}
	exemptLines := map[int]bool{}
	for _, group := range file.Comments {
		for _, c := range group.List {
			if i := strings.Index(c.Text, exemptMark); i >= 0 && strings.TrimSpace(c.Text[i+len(exemptMark):]) != "" {
				line := fset.Position(c.Slash).Line
				exemptLines[line] = true
				exemptLines[line+1] = true
			}
		}
	}
	var found []string
	report := func(n ast.Node, what string) {
		line := fset.Position(n.Pos()).Line
		if exemptLines[line] {
			return
		}
		found = append(found, fmt.Sprintf("%s:%d: %s", name, line, what))
	}
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil || benchmarkFunc(fn) {
			continue
		}
		if fn.Doc != nil && strings.Contains(fn.Doc.Text(), exemptMark) {
			continue
		}
		w := &waitFinder{report: report, src: src, fset: fset}
		w.contextFree = strings.Contains(w.text(fn), "http.NewRequest(")
		ast.Walk(w, fn.Body)
	}
	return found
}

// waitFinder walks a function body and reports its unbounded waits.
type waitFinder struct {
	report func(ast.Node, string)
	src    []byte
	fset   *token.FileSet
	// comm holds the receive expressions that are a select case's own
	// (bounded or judged by the select).
	comm map[ast.Expr]bool
	// contextFree is set when the function makes a request without a
	// context (http.NewRequest): sent by http.DefaultClient, nothing
	// bounds it.
	contextFree bool
	// loops is how many for statements enclose the node being visited.
	loops int
}

func (w *waitFinder) text(n ast.Node) string {
	return string(w.src[w.fset.Position(n.Pos()).Offset:w.fset.Position(n.End()).Offset])
}

func (w *waitFinder) Visit(n ast.Node) ast.Visitor {
	switch n := n.(type) {
	case *ast.ForStmt:
		// A sleep between polls: the loop is the wait, and has its own
		// deadline.
		if n.Init != nil {
			ast.Walk(w, n.Init)
		}
		if n.Cond != nil {
			ast.Walk(w, n.Cond)
		}
		w.loops++
		if n.Post != nil {
			ast.Walk(w, n.Post)
		}
		ast.Walk(w, n.Body)
		w.loops--
		return nil
	case *ast.GoStmt:
		// A goroutine's waits are not the test's; only its arguments are
		// evaluated by the test.
		for _, a := range n.Call.Args {
			ast.Walk(w, a)
		}
		if _, lit := n.Call.Fun.(*ast.FuncLit); !lit {
			ast.Walk(w, n.Call.Fun)
		}
		return nil
	case *ast.FuncLit:
		if handlerFunc(n) {
			return nil // an HTTP handler runs in the server's goroutine
		}
	case *ast.CallExpr:
		if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok {
				switch {
				case x.Name == "testwait":
					// A function handed to a helper runs under its deadline.
					for _, a := range n.Args {
						if _, lit := a.(*ast.FuncLit); !lit {
							ast.Walk(w, a)
						}
					}
					return nil
				case x.Name == "synctest" && sel.Sel.Name == "Test":
					// A bubble's time is fake, and a bubble whose goroutines
					// all block fails as a deadlock.
					return nil
				case x.Name == "time" && sel.Sel.Name == "Sleep" && w.loops == 0:
					w.report(n, "time.Sleep (wait for the state itself)")
				case x.Name == "http" && (sel.Sel.Name == "Get" || sel.Sel.Name == "Post" || sel.Sel.Name == "Head" || sel.Sel.Name == "PostForm"):
					w.report(n, "http."+sel.Sel.Name+" (the default client has no timeout)")
				}
			}
			if sel.Sel.Name == "Wait" && len(n.Args) == 0 {
				w.report(n, w.text(n)+" (use testwait.Call or testwait.Result)")
			}
		}
	case *ast.SelectorExpr:
		if x, ok := n.X.(*ast.Ident); ok && x.Name == "http" && n.Sel.Name == "DefaultClient" && w.contextFree {
			w.report(n, "http.DefaultClient with a request made by http.NewRequest (no timeout, no deadline: use NewRequestWithContext with testwait.Context)")
		}
	case *ast.SelectStmt:
		bounded := false
		if w.comm == nil {
			w.comm = map[ast.Expr]bool{}
		}
		for _, s := range n.Body.List {
			cc := s.(*ast.CommClause)
			if cc.Comm == nil {
				bounded = true // default
				continue
			}
			var recv ast.Expr
			switch c := cc.Comm.(type) {
			case *ast.ExprStmt:
				recv = c.X
			case *ast.AssignStmt:
				recv = c.Rhs[0]
			}
			if recv != nil {
				w.comm[recv] = true
				if deadlineCase(w.text(recv)) {
					bounded = true
				}
			}
		}
		if !bounded {
			w.report(n, "select with no deadline case and no default")
		}
	case *ast.UnaryExpr:
		if n.Op == token.ARROW && !w.comm[n] && !contextDone(w.text(n.X)) {
			w.report(n, "receive "+w.text(n)+" (use testwait.Recv or testwait.Done)")
		}
	}
	return w
}

// contextDone reports whether a receive is from a context's Done (a
// request's, a testwait.Context, a WithTimeout): taken as bounded.
func contextDone(ch string) bool {
	return strings.HasSuffix(ch, "ctx.Done()") || strings.HasSuffix(ch, "Context().Done()")
}

// deadlineCase reports whether a select case's receive ends by a
// deadline: a timer, a time.After, a context's Done.
func deadlineCase(recv string) bool {
	for _, s := range []string{"After(", ".C", "Done()", "timeout", "Timeout", "deadline", "Deadline", "timer", "Timer", "tick", "Tick"} {
		if strings.Contains(recv, s) {
			return true
		}
	}
	return false
}

// handlerFunc reports whether a function literal is an HTTP handler (it
// takes an http.ResponseWriter): it runs in the server's goroutine, and
// ends with its request.
func handlerFunc(f *ast.FuncLit) bool {
	for _, p := range f.Type.Params.List {
		if sel, ok := p.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "ResponseWriter" {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "http" {
				return true
			}
		}
	}
	return false
}

// benchmarkFunc reports whether a function is a benchmark or a helper of
// benchmarks (it takes a *testing.B): go test runs none without -bench.
func benchmarkFunc(fn *ast.FuncDecl) bool {
	for _, p := range fn.Type.Params.List {
		if star, ok := p.Type.(*ast.StarExpr); ok {
			if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "B" {
				return true
			}
		}
	}
	return false
}

// The checker finds each kind of unbounded wait, and lets through the
// bounded ones and those that say why they cannot hang.
func TestUnboundedWaitsFindsEachKind(t *testing.T) {
	src := `package p

func TestX(t *testing.T) {
	<-ch
	select {
	case <-a:
	case <-b:
	}
	wg.Wait()
	cmd.Wait()
	time.Sleep(time.Second)
	http.Get(url)
	req, _ := http.NewRequest("GET", url, nil)
	http.DefaultClient.Do(req)

	select {
	case <-ch:
	case <-time.After(time.Second):
	}
	select {
	case <-ch:
	default:
	}
	<-ctx.Done()
	go func() { <-ch; wg.Wait() }()
	testwait.Call(t, "the workers", func() { wg.Wait() })
	for !done() {
		time.Sleep(time.Millisecond)
	}
	http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-ch })
	synctest.Test(t, func(t *testing.T) { time.Sleep(time.Hour); <-ch })
	time.Sleep(time.Second) // testwait:ok a check that nothing happens
	// testwait:ok the server's goroutine
	<-release
	<-ch // testwait:ok
}

// testwait:ok a helper process's main: it waits to be killed
func helperMain() { <-ch }

func BenchmarkX(b *testing.B) { <-ch }
`
	got := unboundedWaits(t, "x_test.go", []byte(src))
	want := []string{
		"x_test.go:4: receive <-ch (use testwait.Recv or testwait.Done)",
		"x_test.go:5: select with no deadline case and no default",
		"x_test.go:9: wg.Wait() (use testwait.Call or testwait.Result)",
		"x_test.go:10: cmd.Wait() (use testwait.Call or testwait.Result)",
		"x_test.go:11: time.Sleep (wait for the state itself)",
		"x_test.go:12: http.Get (the default client has no timeout)",
		"x_test.go:14: http.DefaultClient with a request made by http.NewRequest (no timeout, no deadline: use NewRequestWithContext with testwait.Context)",
		"x_test.go:35: receive <-ch (use testwait.Recv or testwait.Done)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
