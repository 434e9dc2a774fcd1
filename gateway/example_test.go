package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// A host serves its pool (here one server, "calc") plus a tool of its
// own ("greet") over Streamable HTTP; a client (here another Supervisor)
// sees both and calls both.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The host's pool.
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: zerolog.Nop()})
	if err != nil {
		panic(err)
	}
	defer sup.Close(context.Background())
	if _, err := sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"calc": {Config: mockserver.Command("-name", "calc")},
	}, mcpvisor.AwaitSettled(30*time.Second)); err != nil {
		panic(err)
	}

	// The host's own tool, and the gateway over both.
	var features gateway.Features
	_ = features.AddTool(gateway.Tool{
		Definition: protocol.Tool{Name: "greet", Description: "Greets someone, from the host."},
		Handler: func(_ context.Context, args json.RawMessage) (*protocol.CallToolResult, error) {
			var a struct{ Name string }
			_ = json.Unmarshal(args, &a)
			return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent("Hello, " + a.Name)}}, nil
		},
	})
	gw := gateway.New(sup, gateway.Options{Features: &features})
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); gw.Run(runCtx, 0) }()
	srv := httptest.NewServer(gw.Handler())                      // or gw.Serve(ctx, listener)
	defer func() { srv.Close(); gw.Close(); stopRun(); <-ran }() // testwait:ok Close ends Run at once

	// A client of the gateway.
	client, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: zerolog.Nop()})
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())
	if _, err := client.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"gw": {Config: transports.Config{Type: "http", URL: srv.URL + gateway.MCPPath}},
	}, mcpvisor.AwaitSettled(30*time.Second)); err != nil {
		panic(err)
	}
	var names []string
	for _, t := range client.Tools() {
		if t.Name == "mcp__gw__greet" || t.Name == "mcp__gw__calc__add" {
			names = append(names, t.Name)
		}
	}
	slices.Sort(names)
	fmt.Println(names)
	sum, _ := client.CallTool(ctx, "mcp__gw__calc__add", map[string]any{"a": 2, "b": 40})
	hello, _ := client.CallTool(ctx, "mcp__gw__greet", map[string]any{"name": "Ada"})
	fmt.Println(sum.Content[0].Text, hello.Content[0].Text)
	// Output:
	// [mcp__gw__calc__add mcp__gw__greet]
	// 42 Hello, Ada
}
