package mcpvisor_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
)

// The README's embedding example, word for word: TestReadmeExample keeps
// the two the same, and go test runs it against a real server.
func Example_embedding() {
	ctx := context.Background()
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{}) // stdio servers need no call in main (docs/processes.md)
	if err != nil {
		panic(err)
	}
	defer sup.Close(ctx) // stops every server

	// A host applies its .mcp.json files with SetServers (config.Load, from
	// github.com/mcpvisor/mcpvisor/config, reads them) or adds servers one
	// at a time; here, the bundled mock on stdio.
	st, err := sup.Connect(ctx, "calc", mcpvisor.ServerConfig{Config: mockserver.Command()})
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Status) // connected, failed, needs-auth, pending or disabled

	for _, t := range sup.Tools() { // the pool the model is offered
		fmt.Println(t.Name)
	}
	res, err := sup.Server("calc").CallTool(ctx, "add", map[string]int{"a": 2, "b": 40}) // or CallTool(ctx, "mcp__calc__add", …)
	if err != nil {
		panic(err) // typed: ErrUnknownTool, *NotReadyError, *ConnectionLostError, …
	}
	fmt.Println(res.Content[0].Text)
	// Output:
	// connected
	// mcp__calc__add
	// mcp__calc__announce
	// mcp__calc__echo
	// mcp__calc__fail
	// mcp__calc__sleep
	// 42
}

// The Go block of the README's "Embedding" section is the body of
// Example_embedding, so that the README shows code that compiles and runs.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)## Embedding.*?```go\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no Go block under ## Embedding")
	}
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile("(?s)func Example_embedding\\(\\) \\{\n(.*?)\t// Output:").FindSubmatch(src)
	if body == nil {
		t.Fatal("readme_test.go has no Example_embedding with an Output comment")
	}
	var want strings.Builder
	for _, line := range strings.SplitAfter(string(body[1]), "\n") {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	if got := string(block[1]); got != want.String() {
		t.Errorf("the README's example differs from Example_embedding in readme_test.go; make them the same.\nREADME:\n%s\nExample_embedding:\n%s", got, want.String())
	}
}
