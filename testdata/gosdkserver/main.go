// Command gosdkserver is a small MCP server built with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk), for mcpvisor's interop tests: a
// server that nobody on this project wrote the protocol code of.
//
// It offers two tools, echo (text → the same text) and add (a, b → their
// sum, as text and as structured output {"sum": …}), one static resource
// sdk://greeting, and one prompt greet with a required argument name.
//
// Usage:
//
//	gosdkserver [-versions 2025-11-25,2025-06-18] [-http 127.0.0.1:PORT [-sse]] [-announce] [-trace]
//
// -versions narrows the protocol versions the server advertises and
// negotiates (ServerOptions.SupportedProtocolVersions); by default it speaks
// every version the SDK does.
//
// Without -http the server speaks JSON-RPC on stdin and stdout and exits
// when stdin closes. With -http it serves Streamable HTTP at
// http://ADDR/mcp (mcp.NewStreamableHTTPHandler) until SIGINT or SIGTERM.
// The handler is stateless (no Mcp-Session-Id; the SDK serves 2026-07-28
// only on stateless handlers) when the server speaks 2026-07-28, and
// stateful (sessions, GET stream) when -versions leaves that version out.
// With -sse it serves the legacy HTTP+SSE transport (2024-11-05) at
// http://ADDR/sse instead (mcp.NewSSEHandler): GET opens the session's
// event stream, whose first event names the URL to POST to; a POST to
// /sse itself is refused (400), as a server of that transport does.
//
// -announce adds a third tool, announce (name → a new tool by that name
// that echoes like echo), so that a client can make the server send
// notifications/tools/list_changed.
//
// -trace writes a line "gosdkserver: received METHOD" to stderr for every
// request and notification the server receives, and "gosdkserver: ended
// subscriptions/listen" when a listen stream ends, so that a test can see
// which streams a client opened.
//
// The server logs only to stderr.
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
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	greetingURI  = "sdk://greeting"
	greetingText = "hello from go-sdk"
)

// statelessVersion is the first protocol version without sessions.
const statelessVersion = "2026-07-28"

func main() {
	versions := flag.String("versions", "", "comma-separated protocol versions to support (default: all the SDK speaks)")
	addr := flag.String("http", "", "serve Streamable HTTP at http://`ADDR`/mcp instead of stdio")
	legacySSE := flag.Bool("sse", false, "with -http: serve the legacy HTTP+SSE transport at /sse instead")
	announce := flag.Bool("announce", false, "offer the announce tool, which adds a tool at run time")
	trace := flag.Bool("trace", false, "write every method received to stderr")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(context.Background(), *versions, *addr, *legacySSE, *announce, *trace, logger); err != nil {
		logger.Error("gosdkserver failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, versions, addr string, legacySSE, announce, trace bool, logger *slog.Logger) error {
	opts := &mcp.ServerOptions{Logger: logger}
	if versions != "" {
		opts.SupportedProtocolVersions = strings.Split(versions, ",")
		for _, v := range opts.SupportedProtocolVersions {
			// NewServer panics on a version the SDK does not know.
			if !slices.Contains(mcp.SupportedProtocolVersions(), v) {
				return fmt.Errorf("-versions: %q is not one of %v", v, mcp.SupportedProtocolVersions())
			}
		}
	}
	server := newServer(opts)
	if announce {
		addAnnounceTool(server)
	}
	if trace {
		server.AddReceivingMiddleware(traceMethods)
	}
	if addr == "" {
		// Run returns nil when the client closes stdin.
		return server.Run(ctx, &mcp.StdioTransport{})
	}
	stateless := versions == "" || slices.Contains(opts.SupportedProtocolVersions, statelessVersion)
	return serveHTTP(ctx, server, addr, stateless, legacySSE, logger)
}

// serveHTTP serves server over Streamable HTTP at http://addr/mcp (or
// HTTP+SSE at http://addr/sse, with legacySSE) until SIGINT or SIGTERM.
func serveHTTP(ctx context.Context, server *mcp.Server, addr string, stateless, legacySSE bool, logger *slog.Logger) error {
	mux := http.NewServeMux()
	if legacySSE {
		mux.Handle("/sse", mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil))
	} else {
		mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
			&mcp.StreamableHTTPOptions{Stateless: stateless, Logger: logger}))
	}
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Listen streams and GET streams never end by themselves: bound the
	// wait for them.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

type echoArgs struct {
	Text string `json:"text" jsonschema:"the text to echo back"`
}

type addArgs struct {
	A float64 `json:"a" jsonschema:"the first addend"`
	B float64 `json:"b" jsonschema:"the second addend"`
}

type addResult struct {
	Sum float64 `json:"sum"`
}

// traceMethods writes every method received to stderr, and the end of
// every subscriptions/listen.
func traceMethods(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		fmt.Fprintf(os.Stderr, "gosdkserver: received %s\n", method)
		res, err := next(ctx, method, req)
		if method == "subscriptions/listen" {
			fmt.Fprintf(os.Stderr, "gosdkserver: ended %s\n", method)
		}
		return res, err
	}
}

type announceArgs struct {
	Name string `json:"name" jsonschema:"the name of the tool to add"`
}

// addAnnounceTool offers announce, which adds a tool named by its argument;
// the SDK then sends notifications/tools/list_changed to every session (in
// the 2026-07-28 era, to the subscriptions/listen streams that asked).
func addAnnounceTool(server *mcp.Server) {
	mcp.AddTool(server, &mcp.Tool{Name: "announce", Description: "Add a tool that echoes, under the given name."},
		func(_ context.Context, _ *mcp.CallToolRequest, in announceArgs) (*mcp.CallToolResult, any, error) {
			if in.Name == "" {
				return nil, nil, errors.New(`announce needs a "name"`)
			}
			mcp.AddTool(server, &mcp.Tool{Name: in.Name, Description: "Echo the text back (added by announce)."},
				func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added " + in.Name}}}, nil, nil
		})
}

func newServer(opts *mcp.ServerOptions) *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{Name: "gosdkserver", Version: "1.0.0"}, opts)

	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Echo the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})

	mcp.AddTool(server, &mcp.Tool{Name: "add", Description: "Add two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addArgs) (*mcp.CallToolResult, addResult, error) {
			sum := in.A + in.B
			text := fmt.Sprintf("%g", sum)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, addResult{Sum: sum}, nil
		})

	server.AddResource(&mcp.Resource{URI: greetingURI, Name: "greeting", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			if req.Params.URI != greetingURI {
				return nil, mcp.ResourceNotFoundError(req.Params.URI)
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
				{URI: greetingURI, MIMEType: "text/plain", Text: greetingText},
			}}, nil
		})

	server.AddPrompt(&mcp.Prompt{
		Name:        "greet",
		Description: "Greet someone by name.",
		Arguments:   []*mcp.PromptArgument{{Name: "name", Description: "who to greet", Required: true}},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		name := req.Params.Arguments["name"]
		if name == "" {
			// A plain error would go out with code 0; say what is wrong.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `prompt "greet" needs the argument "name"`}
		}
		return &mcp.GetPromptResult{
			Description: "A greeting",
			Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Say hello to " + name + "."}},
			},
		}, nil
	})
	return server
}
