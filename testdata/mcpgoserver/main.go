// Command mcpgoserver is a small MCP server built with mcp-go
// (github.com/mark3labs/mcp-go), for mcpvisor's interop tests over the
// remote transports: a server that nobody on this project wrote the
// protocol code of.
//
// It offers three tools — echo (text → the same text), add (a, b → their
// sum, as text) and announce (name → a new tool by that name that echoes,
// which makes the server send notifications/tools/list_changed) — and one
// static resource, mcpgo://greeting.
//
// Usage:
//
//	mcpgoserver -transport sse|http -addr 127.0.0.1:PORT [-stateful] [-trace]
//
// -transport sse serves legacy HTTP+SSE (GET /sse, POST /message);
// -transport http serves Streamable HTTP at /mcp, in every era mcp-go
// speaks. In the session eras mcp-go's default session id manager issues
// ids but accepts any well-formed one; -stateful (http only) makes it
// answer ids it did not issue with 404 (server.WithStateful). -trace writes a line "mcpgoserver: received METHOD" to stderr
// for every message the server receives. The server runs until SIGINT or
// SIGTERM and logs only to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

const (
	greetingURI  = "mcpgo://greeting"
	greetingText = "hello from mcp-go"
)

func main() {
	transport := flag.String("transport", "http", "`sse` (legacy HTTP+SSE) or http (Streamable HTTP)")
	addr := flag.String("addr", "127.0.0.1:0", "listen `address`")
	stateful := flag.Bool("stateful", false, "http: answer session ids the server did not issue with 404")
	trace := flag.Bool("trace", false, "write every method received to stderr")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(context.Background(), *transport, *addr, *stateful, *trace, logger); err != nil {
		logger.Error("mcpgoserver failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, transport, addr string, stateful, trace bool, logger *slog.Logger) error {
	var opts []server.ServerOption
	if trace {
		hooks := &server.Hooks{}
		hooks.AddBeforeAny(func(_ context.Context, _ any, method mcp.MCPMethod, _ any) {
			fmt.Fprintf(os.Stderr, "mcpgoserver: received %s\n", method)
		})
		opts = append(opts, server.WithHooks(hooks))
	}
	s := newServer(opts...)
	var handler http.Handler
	switch transport {
	case "sse":
		handler = server.NewSSEServer(s)
	case "http":
		handler = server.NewStreamableHTTPServer(s, server.WithStreamableHTTPLogger(logger), server.WithStateful(stateful))
	default:
		return fmt.Errorf("-transport: %q is neither sse nor http", transport)
	}
	srv := &http.Server{Addr: addr, Handler: handler, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Event streams never end by themselves: bound the wait for them.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

func newServer(opts ...server.ServerOption) *server.MCPServer {
	s := server.NewMCPServer("mcpgoserver", "1.0.0", append([]server.ServerOption{
		server.WithToolCapabilities(true),
		server.WithResourceCapabilities(false, true),
	}, opts...)...)

	echo := func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		text, err := req.RequireString("text")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText(text), nil
	}
	s.AddTool(mcp.NewTool("echo",
		mcp.WithDescription("Echo the text back."),
		mcp.WithString("text", mcp.Required(), mcp.Description("the text to echo back")),
	), echo)

	s.AddTool(mcp.NewTool("add",
		mcp.WithDescription("Add two numbers."),
		mcp.WithNumber("a", mcp.Required(), mcp.Description("the first addend")),
		mcp.WithNumber("b", mcp.Required(), mcp.Description("the second addend")),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a, errA := req.RequireFloat("a")
		b, errB := req.RequireFloat("b")
		if err := errors.Join(errA, errB); err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText(fmt.Sprintf("%g", a+b)), nil
	})

	// AddTool on a running server sends notifications/tools/list_changed
	// to every initialized session (WithToolCapabilities(true)).
	s.AddTool(mcp.NewTool("announce",
		mcp.WithDescription("Add a tool that echoes, under the given name."),
		mcp.WithString("name", mcp.Required(), mcp.Description("the name of the tool to add")),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		name, err := req.RequireString("name")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		s.AddTool(mcp.NewTool(name,
			mcp.WithDescription("Echo the text back (added by announce)."),
			mcp.WithString("text", mcp.Required(), mcp.Description("the text to echo back")),
		), echo)
		return mcp.NewToolResultText("added " + name), nil
	})

	s.AddResource(mcp.NewResource(greetingURI, "greeting", mcp.WithMIMEType("text/plain")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{
				mcp.TextResourceContents{URI: greetingURI, MIMEType: "text/plain", Text: greetingText},
			}, nil
		})
	return s
}
