package mcpvisor_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/testserver"
)

func TestMain(m *testing.M) {
	mcpvisor.HelperMain()
	testserver.Main()
	if mockserver.IsRequested() {
		os.Exit(mockserver.Main(os.Args[1:]))
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		removeSharedProbe()
		mcpvisor.RemoveNestedBuilds()
		os.Exit(code)
	}))
}

// A host starts a supervisor, configures servers, offers the pool to its
// model and routes the model's calls.
func Example() {
	ctx := context.Background()
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	if err != nil {
		panic(err)
	}
	defer sup.Close(ctx)

	// In a real host the servers come from config.Load; here, one
	// test server (a stdio subprocess).
	res, err := sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"calc": {Config: testserver.Command()},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("added:", res.Added)

	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := sup.WaitSettled(waitCtx); err != nil {
		panic(err)
	}
	for _, t := range sup.Tools() {
		fmt.Println("tool:", t.Name)
	}

	out, err := sup.CallTool(ctx, "mcp__calc__add", map[string]int{"a": 2, "b": 40})
	if err != nil {
		panic(err)
	}
	fmt.Println("result:", out.Content[0].Text)
	// Output:
	// added: [calc]
	// tool: mcp__calc__add
	// tool: mcp__calc__announce
	// tool: mcp__calc__echo
	// tool: mcp__calc__fail
	// tool: mcp__calc__meta
	// tool: mcp__calc__sleep
	// result: 42
}

// Subscribers see every server's state changes, numbered.
func ExampleSupervisor_Subscribe() {
	ctx := context.Background()
	sup, _ := mcpvisor.Start(ctx, mcpvisor.Options{})
	defer sup.Close(ctx)

	events := sup.Subscribe(ctx, mcpvisor.FromSequence(0))
	sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{"echo": {Config: testserver.Command()}})
	for ev := range events {
		if ev, ok := ev.(*mcpvisor.ServerStateEvent); ok {
			fmt.Println(ev.Seq, ev.Server, ev.State)
			if ev.State == mcpvisor.StateReady {
				break
			}
		}
	}
	// Output:
	// 1 echo pending
	// 2 echo connecting
	// 3 echo ready
}
