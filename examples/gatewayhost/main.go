// Command gatewayhost embeds the gateway: it serves a Supervisor's pool,
// plus one tool of its own, as one MCP server over Streamable HTTP on
// loopback. It
//
//  1. starts a Supervisor with one server, "calc" (this very program
//     acting as the bundled mock MCP server: tools echo, add, fail, sleep
//     and announce);
//  2. adds a tool of its own, "greet", to a gateway.Features;
//  3. creates a gateway over the Supervisor with those features, runs its
//     event loop and serves it on 127.0.0.1 (-listen), printing the MCP
//     endpoint's URL on stdout;
//  4. serves until interrupted, then drains and closes the gateway and
//     the Supervisor.
//
// Run it from anywhere: go run ./examples/gatewayhost. Any MCP client can
// then connect to the URL it prints; clients see calc__add and the rest
// of the pool (the gateway's default NamesShort style) beside greet.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/protocol"
)

func main() {
	// The Supervisor starts "calc" by running this binary again as the
	// mock server (mockserver.Command); serve as one when asked.
	if mockserver.IsRequested() {
		os.Exit(mockserver.Main(os.Args[1:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Stdout, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatewayhost:", err)
		os.Exit(1)
	}
}

// URLPrefix starts the line run prints once the gateway listens.
const URLPrefix = "MCP endpoint: "

// run serves until ctx ends.
func run(ctx context.Context, stdout io.Writer, args []string) (err error) {
	flags := flag.NewFlagSet("gatewayhost", flag.ContinueOnError)
	listen := flags.String("listen", "127.0.0.1:0", "loopback address to serve MCP on")
	level := flags.String("log", "warn", "level of the logs on stderr")
	if err := flags.Parse(args); err != nil {
		return err
	}
	logLevel, err := zerolog.ParseLevel(*level)
	if err != nil {
		return err
	}
	log := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(logLevel).With().Timestamp().Logger()

	// 1. The pool: one server.
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: log})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = errors.Join(err, sup.Close(cctx))
	}()
	if _, err := sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"calc": {Config: mockserver.Command()},
	}, mcpvisor.AwaitSettled(30*time.Second)); err != nil {
		return err
	}

	// 2. The host's own tool.
	var features gateway.Features
	if err := features.AddTool(gateway.Tool{
		Definition: protocol.Tool{
			Name:        "greet",
			Description: "Greets someone by name, from the host.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
		},
		Handler: greet,
	}); err != nil {
		return err
	}

	// 3. The gateway over the pool, on loopback.
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok || !addr.IP.IsLoopback() {
		ln.Close()
		return fmt.Errorf("-listen %s: want a loopback address", *listen)
	}
	gw := gateway.New(sup, gateway.Options{Logger: log, LocalOnly: true, Features: &features})
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		gw.Run(ctx, 0)
	}()
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx, ln) }()
	fmt.Fprintf(stdout, "%shttp://%s%s\n", URLPrefix, ln.Addr(), gateway.MCPPath)

	// 4. Until interrupted (or the listener fails).
	select {
	case <-ctx.Done():
	case err = <-served:
		served <- nil
	}
	dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	gw.Drain(dctx)
	cancel()
	gw.Close()
	<-ran
	return errors.Join(err, <-served)
}

// greet is the host tool's handler: it runs on the goroutine serving the
// call, and may run concurrently with other calls.
func greet(_ context.Context, args json.RawMessage) (*protocol.CallToolResult, error) {
	var a struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.Name == "" {
		return &protocol.CallToolResult{
			Content: []protocol.Content{{Type: protocol.ContentText, Text: "greet: want {name}"}},
			IsError: true,
		}, nil
	}
	return &protocol.CallToolResult{
		Content: []protocol.Content{{Type: protocol.ContentText, Text: "Hello, " + a.Name + ", from the host."}},
	}, nil
}
