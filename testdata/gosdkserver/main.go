// Command gosdkserver is a small stdio MCP server built with the official Go
// SDK (github.com/modelcontextprotocol/go-sdk), for mcpvisor's interop
// tests: a server that nobody on this project wrote the protocol code of.
//
// It offers two tools, echo (text → the same text) and add (a, b → their
// sum, as text and as structured output {"sum": …}), one static resource
// sdk://greeting, and one prompt greet with a required argument name.
//
// Usage:
//
//	gosdkserver [-versions 2025-11-25,2025-06-18]
//
// -versions narrows the protocol versions the server advertises and
// negotiates (ServerOptions.SupportedProtocolVersions); by default it speaks
// every version the SDK does. The server speaks JSON-RPC on stdin and stdout,
// logs only to stderr, and exits when stdin closes.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	greetingURI  = "sdk://greeting"
	greetingText = "hello from go-sdk"
)

func main() {
	versions := flag.String("versions", "", "comma-separated protocol versions to support (default: all the SDK speaks)")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(context.Background(), *versions, logger); err != nil {
		logger.Error("gosdkserver failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, versions string, logger *slog.Logger) error {
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
	// Run returns nil when the client closes stdin.
	return newServer(opts).Run(ctx, &mcp.StdioTransport{})
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
