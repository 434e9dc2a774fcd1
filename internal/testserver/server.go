package testserver

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Options configure a test server. The zero value serves every protocol
// version under the name "testserver".
type Options struct {
	// Name is the serverInfo name (default "testserver").
	Name string
	// Versions are the protocol versions served, newest first (default:
	// every version the protocol package knows).
	Versions []string
}

// The tools every test server offers.
const (
	// ToolEcho answers with its text argument.
	ToolEcho = "echo"
	// ToolAdd answers with the sum of its a and b arguments, as text and
	// as structuredContent {sum}.
	ToolAdd = "add"
	// ToolFail answers with a result whose isError is set.
	ToolFail = "fail"
	// ToolSleep answers after ms milliseconds, or never once its request
	// is cancelled.
	ToolSleep = "sleep"
	// ToolAnnounce adds a tool named by its text argument and sends
	// notifications/tools/list_changed.
	ToolAnnounce = "announce"
	// ToolMeta answers with the _meta of its request, as the JSON text of
	// its one content block ({} when the request had none).
	ToolMeta = "meta"
)

// Server is a test server. Serve it with ServeStdio or Handler.
//
// Concurrency: safe for concurrent use; mu guards the tool list, which
// announce grows.
type Server struct {
	srv *mcpserver.Server
	wg  sync.WaitGroup // sleeps answering later

	mu    sync.Mutex
	tools []protocol.Tool // guarded by mu
}

// New returns a test server with options o.
func New(o Options) *Server {
	if o.Name == "" {
		o.Name = "testserver"
	}
	s := &Server{tools: standardTools()}
	s.srv = mcpserver.New(mcpserver.Options{
		Info:     protocol.Implementation{Name: o.Name, Version: "1.0.0"},
		Versions: o.Versions,
		Handler:  mcpserver.HandlerFunc(s.serve),
	})
	return s
}

// MCP returns the mcpserver.Server that speaks the protocol for s.
func (s *Server) MCP() *mcpserver.Server { return s.srv }

// Close ends every session and stream, and waits for the sleeps in
// flight to end (their requests are cancelled).
func (s *Server) Close() {
	s.srv.Close()
	s.wg.Wait()
}

func schema(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(append([]string{}, required...))
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `}`)
}

func standardTools() []protocol.Tool {
	return []protocol.Tool{
		{Name: ToolEcho, Description: "Echoes its text argument back.", InputSchema: schema(`"text":{"type":"string"}`, "text")},
		{Name: ToolAdd, Description: "Adds two numbers.", InputSchema: schema(`"a":{"type":"number"},"b":{"type":"number"}`, "a", "b"),
			OutputSchema: schema(`"sum":{"type":"number"}`, "sum")},
		{Name: ToolFail, Description: "Always fails with isError.", InputSchema: schema(``)},
		{Name: ToolSleep, Description: "Answers after ms milliseconds.", InputSchema: schema(`"ms":{"type":"integer"}`, "ms")},
		{Name: ToolAnnounce, Description: "Adds a tool named text and sends tools/list_changed.", InputSchema: schema(`"text":{"type":"string"}`, "text")},
		{Name: ToolMeta, Description: "Answers with the _meta of its request as JSON text.", InputSchema: schema(``)},
	}
}

// callParams are the params of tools/call the tools read.
type callParams struct {
	Meta      json.RawMessage `json:"_meta"`
	Name      string          `json:"name"`
	Arguments struct {
		Text string   `json:"text"`
		A    *float64 `json:"a"`
		B    *float64 `json:"b"`
		Ms   int      `json:"ms"`
	} `json:"arguments"`
}

func text(t string) protocol.CallToolResult {
	return protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(t)}}
}

// serve is the Handler: tools/list and tools/call.
func (s *Server) serve(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
	switch r.Method {
	case protocol.MethodToolsList:
		s.mu.Lock()
		tools := s.tools
		s.mu.Unlock()
		w.Reply(protocol.ListToolsResult{Tools: tools})
	case protocol.MethodToolsCall:
		s.call(ctx, w, r)
	default:
		w.Error(protocol.NewError(protocol.CodeMethodNotFound, "method %q not found", r.Method))
	}
}

func (s *Server) call(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
	var p callParams
	if err := json.Unmarshal(r.Params, &p); err != nil {
		w.Error(protocol.NewError(protocol.CodeInvalidParams, "tools/call: %v", err))
		return
	}
	switch p.Name {
	case ToolEcho:
		w.Reply(text(p.Arguments.Text))
	case ToolAdd:
		if p.Arguments.A == nil || p.Arguments.B == nil {
			w.Reply(protocol.CallToolResult{IsError: true, Content: []protocol.Content{protocol.TextContent("add needs a and b")}})
			return
		}
		sum := strconv.FormatFloat(*p.Arguments.A+*p.Arguments.B, 'g', -1, 64)
		w.Reply(protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(sum)}, StructuredContent: json.RawMessage(`{"sum":` + sum + `}`)})
	case ToolFail:
		w.Reply(protocol.CallToolResult{IsError: true, Content: []protocol.Content{protocol.TextContent("this tool always fails")}})
	case ToolSleep:
		d := time.Duration(p.Arguments.Ms) * time.Millisecond
		s.wg.Go(func() {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				w.Reply(text("slept"))
			case <-ctx.Done(): // cancelled: nothing is answered
			}
		})
	case ToolAnnounce:
		s.mu.Lock()
		s.tools = append(slices.Clip(s.tools), protocol.Tool{Name: p.Arguments.Text, Description: "Announced at run time.", InputSchema: schema(``)})
		s.mu.Unlock()
		w.Reply(text("announced " + p.Arguments.Text))
		s.srv.ListChanged(protocol.NotificationToolsListChanged)
	case ToolMeta:
		meta := string(p.Meta)
		if meta == "" || meta == "null" {
			meta = "{}"
		}
		w.Reply(text(meta))
	default:
		w.Error(protocol.NewError(protocol.CodeInvalidParams, "unknown tool %q", p.Name))
	}
}
