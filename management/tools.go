package management

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The names of the management tools. ListMcpResourceTemplates and
// connect_mcp are mcpvisor's own; the others are the Claude Agent SDK's.
const (
	ToolListMcpResources         = "ListMcpResources"
	ToolListMcpResourceTemplates = "ListMcpResourceTemplates"
	ToolReadMcpResource          = "ReadMcpResource"
	ToolSubscribeMcpResource     = "SubscribeMcpResource"
	ToolUnsubscribeMcpResource   = "UnsubscribeMcpResource"
	ToolSubscribePolling         = "SubscribePolling"
	ToolUnsubscribePolling       = "UnsubscribePolling"
	ToolConnectMcp               = "connect_mcp"
)

// ErrNotStarted: a management tool ran before its supervisor existed.
var ErrNotStarted = errors.New("mcpvisor: management tool called before the supervisor started")

// Tools returns the management tools as built-ins for
// mcpvisor.Options.Builtins. sup returns the supervisor they act on; it is called
// on each call, so the tools can be registered before Start:
//
//	var sup atomic.Pointer[mcpvisor.Supervisor]
//	opts.Builtins = append(opts.Builtins, management.Tools(sup.Load)...)
//	s, err := mcpvisor.Start(ctx, opts)
//	sup.Store(s)
//
// Each tool's result carries its output as JSON text, and also as
// structuredContent when the output is an object (ListMcpResources and
// ListMcpResourceTemplates return arrays, which structuredContent of the
// handshake eras cannot hold). A tool that fails (bad arguments, unknown
// server, a server error) returns a result with IsError set and the
// reason as text, which a model can read; the error return is kept for
// ErrNotStarted. The tools of one Tools call share the
// resource subscription ids they hand out.
func Tools(sup func() *mcpvisor.Supervisor) []mcpvisor.BuiltinTool {
	m := &mgmt{byID: map[string]resourceSub{}, byKey: map[resourceSub]string{}}
	run := map[string]func(context.Context, *mcpvisor.Supervisor, json.RawMessage) (any, error){
		ToolListMcpResources:         listResourcesTool,
		ToolListMcpResourceTemplates: listTemplatesTool,
		ToolReadMcpResource:          readResourceTool,
		ToolSubscribeMcpResource:     m.subscribeResource,
		ToolUnsubscribeMcpResource:   m.unsubscribeResource,
		ToolSubscribePolling:         subscribePollingTool,
		ToolUnsubscribePolling:       unsubscribePollingTool,
		ToolConnectMcp:               connectTool,
	}
	defs := Definitions()
	out := make([]mcpvisor.BuiltinTool, 0, len(defs))
	for _, d := range defs {
		f := run[d.Name]
		out = append(out, mcpvisor.BuiltinTool{Definition: d, Call: func(ctx context.Context, args json.RawMessage) (*protocol.CallToolResult, error) {
			s := sup()
			if s == nil {
				return nil, ErrNotStarted
			}
			res, err := f(ctx, s, args)
			if err != nil {
				return &protocol.CallToolResult{IsError: true, Content: []protocol.Content{protocol.TextContent(err.Error())}}, nil
			}
			return toolOutput(res)
		}})
	}
	return out
}

// toolOutput encodes a management tool's output as its result.
func toolOutput(v any) (*protocol.CallToolResult, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	res := &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(string(data))}}
	if len(data) > 0 && data[0] == '{' {
		res.StructuredContent = data
	}
	return res, nil
}

// mgmt is the state the management tools of one Tools call
// share: the ids of resource subscriptions (the supervisor keeps
// subscriptions by server and URI, the SDK's tools name them by id).
//
// Concurrency: the tools run concurrently; mu guards the maps.
type mgmt struct {
	mu    sync.Mutex
	next  int
	byID  map[string]resourceSub // guarded by mu
	byKey map[resourceSub]string // guarded by mu
}

// resourceSub is one resource subscription.
type resourceSub struct{ server, uri string }

// decodeArgs decodes a tool's arguments (nil or a JSON object) into v.
func decodeArgs(args json.RawMessage, v any) error {
	if len(args) == 0 || string(args) == "null" {
		return nil
	}
	if err := json.Unmarshal(args, v); err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	return nil
}

// required fails when the argument called name is empty.
func required(name, value string) error {
	if value == "" {
		return fmt.Errorf("argument %q is required", name)
	}
	return nil
}
