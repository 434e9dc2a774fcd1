package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
)

func textResult(s string) *protocol.CallToolResult {
	return &protocol.CallToolResult{Content: []protocol.Content{{Type: protocol.ContentText, Text: s}}}
}

// A host's own tool, resource and prompt are served beside the pool's:
// listed, called, read and rendered by a client of the gateway (a
// supervisor over HTTP), the host's tool hides a pool tool of the same
// downstream name, Deny filters host tools too, and adding or removing
// a host tool while clients are connected reaches them as a list change.
func TestGatewayServesHostFeatures(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a", "-prompts", "1", "-resources", "1")}})
	var f gateway.Features
	require.NoError(t, f.AddTool(gateway.Tool{
		Definition: protocol.Tool{Name: "host_echo", Description: "the host's echo"},
		Handler: func(_ context.Context, args json.RawMessage) (*protocol.CallToolResult, error) {
			return textResult("host: " + string(args)), nil
		},
	}))
	// Same downstream name as the pool's a__echo: the host's wins.
	require.NoError(t, f.AddTool(gateway.Tool{
		Definition: protocol.Tool{Name: "a__echo"},
		Handler: func(context.Context, json.RawMessage) (*protocol.CallToolResult, error) {
			return textResult("the host's a__echo"), nil
		},
	}))
	require.NoError(t, f.AddTool(gateway.Tool{
		Definition: protocol.Tool{Name: "host_denied"},
		Handler: func(context.Context, json.RawMessage) (*protocol.CallToolResult, error) {
			return textResult("never"), nil
		},
	}))
	require.NoError(t, f.AddResource(gateway.Resource{
		Resource: protocol.Resource{URI: "host://notes", MimeType: "text/plain"},
		Handler: func(_ context.Context, uri string) (*protocol.ReadResourceResult, error) {
			return &protocol.ReadResourceResult{Contents: []protocol.ResourceContents{{URI: uri, Text: "the host's notes"}}}, nil
		},
	}))
	require.NoError(t, f.AddPrompt(gateway.Prompt{
		Prompt: protocol.Prompt{Name: "host_prompt"},
		Handler: func(_ context.Context, args map[string]string) (*protocol.GetPromptResult, error) {
			return &protocol.GetPromptResult{Messages: []protocol.PromptMessage{{Role: "user",
				Content: protocol.Content{Type: protocol.ContentText, Text: "hello " + args["who"]}}}}, nil
		},
	}))
	_, srv := serve(t, sup, gateway.Options{Features: &f, Deny: []string{"host_denied"}})
	host := downstream(t, srv.URL, "")
	ctx := testwait.Context(t)

	tools := names(host.Tools())
	assert.Contains(t, tools, "mcp__gw__host_echo")
	assert.Contains(t, tools, "mcp__gw__a__add")
	assert.NotContains(t, tools, "mcp__gw__host_denied")
	res, err := host.CallTool(ctx, "mcp__gw__host_echo", map[string]any{"x": 1})
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	assert.Equal(t, `host: {"x":1}`, res.Content[0].Text)
	res, err = host.CallTool(ctx, "mcp__gw__a__echo", map[string]any{"text": "pool"})
	require.NoError(t, err)
	assert.Equal(t, "the host's a__echo", res.Content[0].Text)
	_, err = host.CallTool(ctx, "mcp__gw__host_denied", map[string]any{})
	require.Error(t, err)

	rs, _, err := host.Resources().List("gw")
	require.NoError(t, err)
	require.Len(t, rs, 2)
	assert.Equal(t, "host://notes", rs[0].Resource.URI)
	rr, err := host.Resources().Read(ctx, "gw", "host://notes")
	require.NoError(t, err)
	require.Len(t, rr.Contents, 1)
	assert.Equal(t, "the host's notes", rr.Contents[0].Text)

	pr, err := host.Prompts().Get(ctx, "mcp__gw__host_prompt", map[string]string{"who": "world"})
	require.NoError(t, err)
	require.Len(t, pr.Messages, 1)
	assert.Equal(t, "hello world", pr.Messages[0].Content.Text)

	// Added and removed while the client is connected.
	require.NoError(t, f.AddTool(gateway.Tool{
		Definition: protocol.Tool{Name: "host_late"},
		Handler: func(context.Context, json.RawMessage) (*protocol.CallToolResult, error) {
			return textResult("late"), nil
		},
	}))
	require.Eventually(t, func() bool {
		return contains(names(host.Tools()), "mcp__gw__host_late")
	}, 10*time.Second, 10*time.Millisecond, "the added host tool reaches the client")
	require.True(t, f.RemoveTool("host_late"))
	require.False(t, f.RemoveTool("host_late"))
	require.Eventually(t, func() bool {
		return !contains(names(host.Tools()), "mcp__gw__host_late")
	}, 10*time.Second, 10*time.Millisecond, "the removed host tool leaves the client")
}

// A tool, resource or prompt that cannot be served is refused with
// ErrInvalidFeature, and nothing is added.
func TestFeaturesRefuseInvalid(t *testing.T) {
	ok := func(context.Context, json.RawMessage) (*protocol.CallToolResult, error) { return textResult(""), nil }
	var f gateway.Features
	for _, tool := range []gateway.Tool{
		{Definition: protocol.Tool{Name: ""}, Handler: ok},
		{Definition: protocol.Tool{Name: "nohandler"}},
		{Definition: protocol.Tool{Name: "mcp__a__b"}, Handler: ok},
		{Definition: protocol.Tool{Name: "wait_for_channel_message"}, Handler: ok},
		{Definition: protocol.Tool{Name: "badschema", InputSchema: json.RawMessage(`[1]`)}, Handler: ok},
	} {
		err := f.AddTool(tool)
		assert.True(t, errors.Is(err, gateway.ErrInvalidFeature), "%q: %v", tool.Definition.Name, err)
	}
	assert.ErrorIs(t, f.AddResource(gateway.Resource{Resource: protocol.Resource{URI: "x://y"}}), gateway.ErrInvalidFeature)
	assert.ErrorIs(t, f.AddPrompt(gateway.Prompt{Prompt: protocol.Prompt{Name: "p"}}), gateway.ErrInvalidFeature)
	assert.False(t, f.RemoveTool("nohandler"))
	assert.False(t, f.RemoveResource("x://y"))
	assert.False(t, f.RemovePrompt("p"))
}

// Options.Validate refuses a glob that would match nothing and an
// unknown name style, with ErrInvalidOptions; the zero value is valid.
func TestOptionsValidate(t *testing.T) {
	assert.NoError(t, gateway.Options{}.Validate())
	assert.NoError(t, gateway.Options{Allow: []string{"mcp__a__*"}, Deny: []string{"x"}, Names: gateway.NamesBare}.Validate())
	for _, o := range []gateway.Options{{Allow: []string{"["}}, {Deny: []string{"a[", "b"}}, {Names: "long"}} {
		err := o.Validate()
		assert.ErrorIs(t, err, gateway.ErrInvalidOptions, "%+v", o)
	}
}
