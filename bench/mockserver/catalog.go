package mockserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// server is the mock's catalogue and state, whatever the transport: the
// tools (which announce and the fixtures change), the extension and task
// state, the fault counters, and the mcpserver.Server that speaks the
// protocol for it. It is the mcpserver.Handler of that Server.
//
// Concurrency: requests are served concurrently (HTTP) and answered from
// other goroutines (latency, sleep); tmu guards the tools, each piece of
// extension state its own mutex; dead is closed once, by die.
type server struct {
	o        Options
	srv      *mcpserver.Server
	versions []string

	tmu   sync.Mutex
	tools []protocol.Tool // guarded by tmu; grows with announce
	// dynamicPrompt is set while the conformance fixtures list
	// test_dynamic_prompt (test_trigger_prompt_change); guarded by tmu.
	dynamicPrompt bool

	ext     extensions     // the extension features; its own lock (see extensions)
	tasks   taskState      // the tasks extension's tasks (conformance fixtures)
	faults  faults         // the faults Options ask for; its own locks (see faults)
	payload string         // echo's answer with Options.Payload
	wg      sync.WaitGroup // answers given later (latency, sleep, fixtures that wait)

	dead     chan struct{} // closed when an exit fault fires
	deadOnce sync.Once
	code     int // the exit code; written before dead is closed
}

func newServer(o Options) *server {
	if o.Name == "" {
		o.Name = "mockserver"
	}
	s := &server{o: o, versions: o.Versions, payload: strings.Repeat("x", max(o.Payload, 0)), dead: make(chan struct{})}
	if len(s.versions) == 0 {
		s.versions = protocol.SupportedVersions()
	}
	s.faults.o, s.faults.die, s.faults.later = &s.o, s.die, s.later
	s.ext.o, s.ext.later = &s.o, s.later
	s.tools = standardTools(o)
	s.tools = append(s.tools, s.ext.tools()...)
	if o.Conformance {
		s.tools = append(s.tools, conformanceTools()...)
		s.tools = append(s.tools, mrtrTools()...)
		s.tools = append(s.tools, statelessTools()...)
		s.tools = append(s.tools, tasksTools()...)
	}
	for i := 1; i <= o.Tools; i++ {
		s.tools = append(s.tools, protocol.Tool{
			Name: fmt.Sprintf("tool_%03d", i), Description: "An extra tool that echoes.", InputSchema: schema(`"text":{"type":"string"}`),
		})
	}
	for i := range s.tools {
		if d, ok := o.Describe[s.tools[i].Name]; ok {
			s.tools[i].Description = d
		}
	}
	retry := o.SSERetry
	if retry <= 0 {
		retry = DefaultSSERetry
	}
	s.srv = mcpserver.New(mcpserver.Options{
		Info:               protocol.Implementation{Name: o.Name, Version: "1.0.0"},
		Instructions:       o.Instructions,
		Versions:           s.versions,
		Capabilities:       func(*mcpserver.Request) protocol.ServerCapabilities { return s.capabilities() },
		Handler:            s,
		Middleware:         s.faults.middleware(),
		FrameHook:          s.faults.frameHook(),
		Subscriptions:      s.ext.agreedFilter,
		ModernResult:       s.cacheable,
		RequireInitialized: true,
		Inline:             true,
		// The mock's clients (mcpvisor's supervisor) take a channel's
		// messages and list_changed over stdio in every era.
		ModernConnNotifications: true,
		DiscoverAllVersions:     true,
		MaxMessageSize:          maxBody,
		HTTP: mcpserver.HTTPOptions{
			OutboxSize:   maxEvents,
			SSEResponses: o.SSEResponses,
			SSERetry:     retry,
			NoGetStream:  o.NoGetStream,
		},
	})
	s.ext.srv = s.srv
	return s
}

// Limits of the mock's transports.
const (
	maxBody   = 64 << 20 // a message: a line, a request body, a WebSocket message
	maxEvents = 1024     // the events an event stream keeps for resumption
)

// schema is an object schema with the given properties JSON and required
// members.
func schema(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(append([]string{}, required...)) // [] rather than null: strict validators reject null
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `}`)
}

// standardTools are the tools every mock serves (and those its options
// add).
func standardTools(o Options) []protocol.Tool {
	readOnly := true
	tools := []protocol.Tool{
		{Name: "echo", Description: "Echoes its text argument back.", InputSchema: schema(`"text":{"type":"string"}`, "text"),
			Annotations: &protocol.ToolAnnotations{ReadOnlyHint: &readOnly, IdempotentHint: &readOnly}},
		{Name: "add", Description: "Adds two numbers.", InputSchema: schema(`"a":{"type":"number"},"b":{"type":"number"}`, "a", "b"),
			OutputSchema: schema(`"sum":{"type":"number"}`, "sum")},
		{Name: "fail", Description: "Always fails with isError.", InputSchema: schema(``)},
		{Name: "sleep", Description: "Sleeps for ms milliseconds.", InputSchema: schema(`"ms":{"type":"integer"}`, "ms")},
		{Name: "announce", Description: "Adds a tool named text and sends tools/list_changed.", InputSchema: schema(`"text":{"type":"string"}`, "text")},
	}
	if o.NotifyTool {
		tools = append(tools, protocol.Tool{Name: "notify", Description: "Sends the notification method with params to every connection.",
			InputSchema: schema(`"method":{"type":"string"},"params":{"type":"object"}`, "method")})
	}
	if o.LogLevelTool {
		tools = append(tools, protocol.Tool{Name: "loglevel", Description: "Answers the logging levels the client asked for.", InputSchema: schema(``)})
	}
	if o.BlockTool {
		tools = append(tools, protocol.Tool{Name: "block", Description: "Sleeps for ms milliseconds reading and answering nothing meanwhile.",
			InputSchema: schema(`"ms":{"type":"integer"}`, "ms")})
	}
	if o.Redescribe {
		tools = append(tools, protocol.Tool{Name: "redescribe", Description: "Changes the description of tool to text and sends tools/list_changed.",
			InputSchema: schema(`"tool":{"type":"string"},"text":{"type":"string"}`, "tool", "text")})
	}
	return tools
}

// die fires an exit fault: the server stops (Run returns code; an HTTP
// server closes every connection and ExitCode reports code).
func (s *server) die(code int) {
	s.deadOnce.Do(func() {
		s.code = code
		close(s.dead)
	})
}

// exitCode returns the exit fault's code, if one fired.
func (s *server) exitCode() (int, bool) {
	select {
	case <-s.dead:
		return s.code, true
	default:
		return 0, false
	}
}

func (s *server) capabilities() protocol.ServerCapabilities {
	c := protocol.ServerCapabilities{Tools: &protocol.ListChangedCapability{ListChanged: true}}
	if s.o.Resources > 0 {
		c.Resources = &protocol.ResourcesCapability{}
	}
	if s.o.Prompts > 0 {
		c.Prompts = &protocol.ListChangedCapability{}
	}
	if s.o.LogLevelTool {
		logging := json.RawMessage(`{}`)
		c.Logging = &logging
	}
	if s.o.Conformance {
		logging := json.RawMessage(`{}`)
		c.Resources = &protocol.ResourcesCapability{Subscribe: true}
		c.Prompts = &protocol.ListChangedCapability{ListChanged: true}
		c.Logging = &logging
		c.Completions = &logging
		c.Extensions = map[string]json.RawMessage{
			protocol.ExtensionTasks:  json.RawMessage(`{}`),
			protocol.ExtensionSkills: json.RawMessage(`{"directoryRead":true}`),
		}
	}
	s.ext.capabilities(&c)
	return c
}

// ServeMCP implements mcpserver.Handler: the catalogue.
func (s *server) ServeMCP(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
	if s.o.Conformance && s.conformanceDispatch(ctx, w, r) {
		return
	}
	if s.ext.request(w, r) {
		return
	}
	switch r.Method {
	case protocol.MethodToolsList:
		s.tmu.Lock()
		tools := s.tools
		s.tmu.Unlock()
		page, next := paginate(tools, cursorOf(r.Params), s.o.PageSize)
		w.Reply(protocol.ListToolsResult{Tools: page, NextCursor: next})
		s.ext.channelAtStart(r.Session)
	case protocol.MethodToolsCall:
		s.callTool(ctx, w, r)
	case protocol.MethodResourcesList:
		w.Reply(protocol.ListResourcesResult{Resources: s.resources()})
	case protocol.MethodResourcesTemplatesList:
		w.Reply(protocol.ListResourceTemplatesResult{ResourceTemplates: []protocol.ResourceTemplate{
			{URITemplate: "mock://template/{id}", Name: "template", MimeType: "text/plain"},
		}})
	case protocol.MethodResourcesRead:
		var p protocol.ReadResourceParams
		_ = json.Unmarshal(r.Params, &p)
		if !strings.HasPrefix(p.URI, "mock://") {
			w.Error(protocol.NewError(protocol.CodeInvalidParams, "no resource %q", p.URI)) // SEP-2164
			return
		}
		w.Reply(protocol.ReadResourceResult{Contents: []protocol.ResourceContents{
			{URI: p.URI, MimeType: "text/plain", Text: "contents of " + p.URI + s.ext.versionSuffix(p.URI)},
		}})
	case protocol.MethodPromptsList:
		w.Reply(protocol.ListPromptsResult{Prompts: s.prompts()})
	case protocol.MethodPromptsGet:
		var p protocol.GetPromptParams
		_ = json.Unmarshal(r.Params, &p)
		w.Reply(protocol.GetPromptResult{Description: p.Name, Messages: []protocol.PromptMessage{
			{Role: "user", Content: protocol.TextContent(fmt.Sprintf("prompt %s for %s", p.Name, p.Arguments["name"]))},
		}})
	default:
		w.Error(protocol.NewError(protocol.CodeMethodNotFound, "method %q not found", r.Method))
	}
}

// HandleNotification implements mcpserver.NotificationHandler.
func (s *server) HandleNotification(_ context.Context, _ *mcpserver.Session, method string, params json.RawMessage) {
	s.ext.notification(method, params)
}

// cacheable is the ModernResult of the mock: the complete results of the
// cacheable methods get resultType and the caching hints of
// Options.CacheTTL and CacheScope (SEP-2549); the others go as they are.
func (s *server) cacheable(r *mcpserver.Request, result any) any {
	if !mcpserver.Cacheable(r.Method) {
		return result
	}
	ttl := s.o.CacheTTL
	if ttl == 0 {
		ttl = defaultCacheTTL
	}
	hint := protocol.CacheHint{TTLMs: max(ttl.Milliseconds(), 0), Public: s.o.CacheScope != protocol.CacheScopePrivate}
	return mcpserver.CompleteResult(result, &hint)
}

// defaultCacheTTL is the ttlMs of Options.CacheTTL's zero value.
const defaultCacheTTL = time.Minute

func (s *server) callTool(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
	var p callParams
	if err := decodeCallParams(r.Params, &p); err != nil {
		w.Error(protocol.NewError(protocol.CodeInvalidParams, "%v", err))
		return
	}
	if s.o.OversizeBytes > 0 {
		w.ReplyWith(oversizeAnswer(r.ID, s.o.OversizeBytes))
		return
	}
	if s.o.Conformance && s.conformanceCall(ctx, w, r, p.Name) {
		return
	}
	text := func(t string) protocol.CallToolResult {
		return protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(t)}}
	}
	switch {
	case isEchoTool(p.Name):
		t := p.Arguments.Text
		if s.o.Payload > 0 {
			t = s.payload
		}
		if frame, ok := appendTextResult(make([]byte, 0, 96+len(t)), r.ID, t); ok {
			w.WriteFrame(frame)
			return
		}
		w.Reply(text(t))
	case p.Name == "add":
		if p.Arguments.A == nil || p.Arguments.B == nil {
			w.Reply(protocol.CallToolResult{IsError: true, Content: []protocol.Content{protocol.TextContent("add needs a and b")}})
			return
		}
		sum := strconv.FormatFloat(*p.Arguments.A+*p.Arguments.B, 'g', -1, 64)
		w.Reply(protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(sum)}, StructuredContent: json.RawMessage(`{"sum":` + sum + `}`)})
	case p.Name == "announce":
		s.tmu.Lock()
		s.tools = append(slices.Clip(s.tools), protocol.Tool{Name: p.Arguments.Text, Description: "Announced at run time.", InputSchema: json.RawMessage(`{"type":"object"}`)})
		s.tmu.Unlock()
		w.Reply(text("announced " + p.Arguments.Text))
		s.srv.ListChanged(protocol.NotificationToolsListChanged)
	case p.Name == "redescribe" && s.o.Redescribe:
		s.tmu.Lock()
		i := slices.IndexFunc(s.tools, func(t protocol.Tool) bool { return t.Name == p.Arguments.Tool })
		if i >= 0 {
			s.tools = slices.Clone(s.tools) // lists already answered keep theirs
			s.tools[i].Description = p.Arguments.Text
		}
		s.tmu.Unlock()
		if i < 0 {
			w.Reply(protocol.CallToolResult{IsError: true, Content: []protocol.Content{protocol.TextContent("no tool " + p.Arguments.Tool)}})
			return
		}
		w.Reply(text("redescribed " + p.Arguments.Tool))
		s.srv.ListChanged(protocol.NotificationToolsListChanged)
	case p.Name == "loglevel" && s.o.LogLevelTool:
		seen := struct {
			SetLevel protocol.LoggingLevel `json:"setLevel"`
			Meta     protocol.LoggingLevel `json:"meta"`
		}{SetLevel: r.Session.Client().LogLevel}
		if r.Meta != nil {
			seen.Meta = r.Meta.LogLevel
		}
		b, _ := json.Marshal(seen)
		w.Reply(text(string(b)))
	case p.Name == "notify" && s.o.NotifyTool:
		var params any
		if len(p.Arguments.Params) > 0 {
			params = p.Arguments.Params
		}
		s.srv.Broadcast(p.Arguments.Method, params)
		w.Reply(text("sent " + p.Arguments.Method))
	case s.ext.tool(w, r, p.Name):
	case p.Name == "fail":
		w.Reply(protocol.CallToolResult{IsError: true, Content: []protocol.Content{protocol.TextContent("this tool always fails")}})
	case p.Name == "block" && s.o.BlockTool:
		// Inline (newServer sets it): this goroutine reads the connection.
		time.Sleep(time.Duration(p.Arguments.Ms) * time.Millisecond)
		w.Reply(text("blocked"))
	case p.Name == "sleep":
		s.later(func() {
			time.Sleep(time.Duration(p.Arguments.Ms) * time.Millisecond)
			w.Reply(text("slept"))
		})
	default:
		w.Error(protocol.NewError(protocol.CodeInvalidParams, "unknown tool %q", p.Name))
	}
}

// later runs f on a goroutine of its own (the mock serves each
// connection's requests in order on its reader: whatever waits answers
// from elsewhere); Run waits for it at the end of its input.
func (s *server) later(f func()) { s.wg.Go(f) }

func (s *server) resources() []protocol.Resource {
	out := make([]protocol.Resource, s.o.Resources)
	for i := range out {
		out[i] = protocol.Resource{URI: fmt.Sprintf("mock://resource/%d", i+1), Name: fmt.Sprintf("resource %d", i+1), MimeType: "text/plain"}
	}
	return out
}

func (s *server) prompts() []protocol.Prompt {
	out := make([]protocol.Prompt, s.o.Prompts)
	for i := range out {
		out[i] = protocol.Prompt{Name: fmt.Sprintf("prompt_%d", i+1), Arguments: []protocol.PromptArgument{{Name: "name", Required: true}}}
	}
	return out
}

func cursorOf(params json.RawMessage) string {
	var p protocol.PaginatedParams
	_ = json.Unmarshal(params, &p)
	return p.Cursor
}

func paginate[T any](items []T, cursor string, size int) ([]T, string) {
	start, _ := strconv.Atoi(cursor)
	if size <= 0 || start < 0 || start > len(items) {
		if start > len(items) {
			start = len(items)
		}
		return items[max(start, 0):], ""
	}
	end := min(start+size, len(items))
	next := ""
	if end < len(items) {
		next = strconv.Itoa(end)
	}
	return items[start:end], next
}

// stderrf writes one line of what the mock does to stderr (a mock server
// is a process of its own, or a test's).
func stderrf(format string, args ...any) { fmt.Fprintf(os.Stderr, "mockserver: "+format+"\n", args...) }
