package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// The management tools let a host's model see and follow MCP resources
// itself: ListMcpResources, ReadMcpResource, SubscribeMcpResource,
// UnsubscribeMcpResource, SubscribePolling, UnsubscribePolling. They are
// BuiltinTools, so they join the tool pool through Options.Builtins.
const (
	ToolListMcpResources       = "ListMcpResources"
	ToolReadMcpResource        = "ReadMcpResource"
	ToolSubscribeMcpResource   = "SubscribeMcpResource"
	ToolUnsubscribeMcpResource = "UnsubscribeMcpResource"
	ToolSubscribePolling       = "SubscribePolling"
	ToolUnsubscribePolling     = "UnsubscribePolling"
)

// ErrNotStarted: a management tool ran before its supervisor existed.
var ErrNotStarted = errors.New("mcpvisor: management tool called before the supervisor started")

// ManagementTools returns the management tools as built-ins for
// Options.Builtins. sup returns the supervisor they act on; it is called
// on each call, so the tools can be registered before Start:
//
//	var sup *mcpvisor.Supervisor
//	opts.Builtins = append(opts.Builtins, mcpvisor.ManagementTools(func() *mcpvisor.Supervisor { return sup })...)
//	sup, err = mcpvisor.Start(ctx, opts)
//
// A tool that fails (bad arguments, unknown server, a server error)
// returns a result with IsError set and the reason as text, which a model
// can read; the error return is kept for ErrNotStarted.
func ManagementTools(sup func() *Supervisor) []BuiltinTool {
	defs := ManagementToolDefinitions()
	run := map[string]func(context.Context, *Supervisor, json.RawMessage) (any, error){
		ToolListMcpResources:       listResourcesTool,
		ToolReadMcpResource:        readResourceTool,
		ToolSubscribeMcpResource:   subscribeResourceTool,
		ToolUnsubscribeMcpResource: unsubscribeResourceTool,
		ToolSubscribePolling:       subscribePollingTool,
		ToolUnsubscribePolling:     unsubscribePollingTool,
	}
	out := make([]BuiltinTool, 0, len(defs))
	for _, d := range defs {
		f := run[d.Name]
		out = append(out, BuiltinTool{Definition: d, Call: func(ctx context.Context, args json.RawMessage) (*protocol.CallToolResult, error) {
			s := sup()
			if s == nil {
				return nil, ErrNotStarted
			}
			res, err := f(ctx, s, args)
			if err != nil {
				return &protocol.CallToolResult{IsError: true, Content: []protocol.Content{protocol.TextContent(err.Error())}}, nil
			}
			if text, ok := res.(string); ok {
				return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(text)}}, nil
			}
			data, err := json.Marshal(res)
			if err != nil {
				return nil, err
			}
			return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(string(data))}, StructuredContent: data}, nil
		}})
	}
	return out
}

// ManagementToolDefinitions returns the management tools' definitions
// (name, description, input schema), for hosts that run them themselves.
func ManagementToolDefinitions() []protocol.Tool {
	schema := func(props string, required ...string) json.RawMessage {
		req, _ := json.Marshal(append([]string{}, required...))
		return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `}`)
	}
	ro, no := true, false
	readOnly := &protocol.ToolAnnotations{ReadOnlyHint: &ro, IdempotentHint: &ro, OpenWorldHint: &no}
	const server = `"server":{"type":"string","description":"The MCP server's configured name."}`
	const uri = `"uri":{"type":"string","description":"The resource's URI."}`
	return []protocol.Tool{
		{Name: ToolListMcpResources, Description: "Lists the resources and resource templates of the connected MCP servers (of one server, when server is given).",
			InputSchema: schema(server), Annotations: readOnly},
		{Name: ToolReadMcpResource, Description: "Reads a resource from an MCP server.",
			InputSchema: schema(server+","+uri, "server", "uri"), Annotations: readOnly},
		{Name: ToolSubscribeMcpResource, Description: "Subscribes to updates of a resource of an MCP server; updates arrive as events until unsubscribed.",
			InputSchema: schema(server+","+uri, "server", "uri")},
		{Name: ToolUnsubscribeMcpResource, Description: "Ends a resource subscription.",
			InputSchema: schema(server+","+uri, "server", "uri")},
		{Name: ToolSubscribePolling, Description: "Polls a tool call (tool, arguments) or a resource read (server, uri) every intervalMs milliseconds (at least 1000, default 5000) and reports each change. Returns the subscription id.",
			InputSchema: schema(`"tool":{"type":"string","description":"The tool's qualified name."},"arguments":{"type":"object"},` + server + "," + uri +
				`,"intervalMs":{"type":"integer","minimum":1000,"default":5000}`)},
		{Name: ToolUnsubscribePolling, Description: "Stops a polling subscription by its id.",
			InputSchema: schema(`"id":{"type":"string","description":"The id SubscribePolling returned."}`, "id")},
	}
}

type mgmtArgs struct {
	Server     string          `json:"server"`
	URI        string          `json:"uri"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"`
	IntervalMs int64           `json:"intervalMs"`
	ID         string          `json:"id"`
}

func decodeMgmt(args json.RawMessage, need ...string) (mgmtArgs, error) {
	var a mgmtArgs
	if len(args) > 0 {
		if err := json.Unmarshal(args, &a); err != nil {
			return a, fmt.Errorf("arguments: %w", err)
		}
	}
	for _, n := range need {
		v := map[string]string{"server": a.Server, "uri": a.URI, "id": a.ID}[n]
		if v == "" {
			return a, fmt.Errorf("argument %q is required", n)
		}
	}
	return a, nil
}

// resourceEntry is one line of ListMcpResources.
type resourceEntry struct {
	Server      string `json:"server"`
	URI         string `json:"uri,omitempty"`
	URITemplate string `json:"uriTemplate,omitempty"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
}

func listResourcesTool(_ context.Context, s *Supervisor, args json.RawMessage) (any, error) {
	a, err := decodeMgmt(args)
	if err != nil {
		return nil, err
	}
	rs, ts, err := s.ListResources(a.Server)
	if err != nil {
		return nil, err
	}
	out := struct {
		Resources []resourceEntry `json:"resources"`
		Templates []resourceEntry `json:"templates"`
	}{Resources: []resourceEntry{}, Templates: []resourceEntry{}}
	for _, r := range rs {
		out.Resources = append(out.Resources, resourceEntry{Server: r.Server, URI: r.Resource.URI, Name: r.Resource.Name, Description: r.Resource.Description, MimeType: r.Resource.MimeType})
	}
	for _, t := range ts {
		out.Templates = append(out.Templates, resourceEntry{Server: t.Server, URITemplate: t.Template.URITemplate, Name: t.Template.Name, Description: t.Template.Description, MimeType: t.Template.MimeType})
	}
	return out, nil
}

func readResourceTool(ctx context.Context, s *Supervisor, args json.RawMessage) (any, error) {
	a, err := decodeMgmt(args, "server", "uri")
	if err != nil {
		return nil, err
	}
	return s.ReadResource(ctx, a.Server, a.URI)
}

func subscribeResourceTool(ctx context.Context, s *Supervisor, args json.RawMessage) (any, error) {
	a, err := decodeMgmt(args, "server", "uri")
	if err != nil {
		return nil, err
	}
	if err := s.SubscribeResource(ctx, a.Server, a.URI); err != nil {
		return nil, err
	}
	return fmt.Sprintf("subscribed to %s on %s", a.URI, a.Server), nil
}

func unsubscribeResourceTool(ctx context.Context, s *Supervisor, args json.RawMessage) (any, error) {
	a, err := decodeMgmt(args, "server", "uri")
	if err != nil {
		return nil, err
	}
	if err := s.UnsubscribeResource(ctx, a.Server, a.URI); err != nil {
		return nil, err
	}
	return fmt.Sprintf("unsubscribed from %s on %s", a.URI, a.Server), nil
}

func subscribePollingTool(_ context.Context, s *Supervisor, args json.RawMessage) (any, error) {
	a, err := decodeMgmt(args)
	if err != nil {
		return nil, err
	}
	id, err := s.SubscribePolling(PollSpec{Tool: a.Tool, Args: a.Arguments, Server: a.Server, URI: a.URI, Interval: time.Duration(a.IntervalMs) * time.Millisecond})
	if err != nil {
		return nil, err
	}
	return struct {
		ID         string `json:"id"`
		IntervalMs int64  `json:"intervalMs"`
	}{id, s.Polls()[id].Interval.Milliseconds()}, nil
}

func unsubscribePollingTool(_ context.Context, s *Supervisor, args json.RawMessage) (any, error) {
	a, err := decodeMgmt(args, "id")
	if err != nil {
		return nil, err
	}
	if err := s.UnsubscribePolling(a.ID); err != nil {
		return nil, err
	}
	return "stopped " + a.ID, nil
}
