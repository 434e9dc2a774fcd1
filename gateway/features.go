package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// listTools lists the host's tools, then the pool's (after Allow/Deny)
// under their downstream names, then the gateway's own
// wait_for_channel_message.
func (g *Gateway) listTools(ctx context.Context) protocol.ListToolsResult {
	pool := g.b.Tools()
	if g.search.modeOf(ctx, pool) == ToolsSearch {
		return g.search.list(ctx, pool) // search.go
	}
	idx := g.naming.fresh(pool)
	host := g.features.toolList()
	out := make([]protocol.Tool, 0, len(host)+len(pool)+1)
	hidden := map[string]bool{} // the host's names hide the pool's
	for _, def := range host {
		hidden[def.Name] = true
		if g.gate.offered(def.Name) {
			out = append(out, def)
		}
	}
	for _, t := range pool {
		if t.Deferred || !g.gate.offered(t.Name) { // a deferred server's tools are found by search only
			continue
		}
		def := t.Definition
		def.Name = idx.downstreamTool(t.Name)
		if hidden[def.Name] {
			continue
		}
		if idx.shortened[t.Name] {
			def.Meta = withOriginal(def.Meta, t.Server, t.Definition.Name)
		}
		out = append(out, def)
	}
	if g.chans.inbox != nil && g.gate.offered(waitToolName) {
		out = append(out, waitTool)
	}
	if g.pages.offered() {
		out = append(out, pageTool)
	}
	out = append(out, g.search.deferredTools(ctx, pool)...) // the search tools, while a deferred server has tools
	return protocol.ListToolsResult{Tools: out}
}

// callRouter is the per-call path's one job: it routes tools/call,
// prompts/get and resources/read to what serves them (the host's
// Features, the gateway's own tools, the supervisor), through the input
// rounds for a client of the stateless era, and fits the results.
//
// Concurrency: safe for concurrent use by the goroutines serving calls:
// its fields are set by New and only read after; each part it uses
// guards its own state (calls and inputs their locks, metrics atomics).
type callRouter struct {
	b        Backend
	features *Features     // the host's own tools, prompts and resources (may be nil)
	gate     *accessGate   // Allow and Deny
	view     *accessView   // the task ids' owner tags
	naming   *namer        // downstream names to the pool's
	pool     *pool         // the server of a prompt or resource; tasks created
	calls    *callTable    // the downstream calls in flight
	inputs   *inputRounds  // the stateless-era clients' input rounds
	chans    *channelWaits // wait_for_channel_message
	pages    *resultPages  // results that fit, read_result_page
	search   *searchMode   // the search tools
	startup  *startupWait  // a tool of a server still starting
	front    *front        // the management tools' admin check
	metrics  *metrics      // the calls' counts and durations
}

// callTool routes a tools/call through the supervisor: for a client of
// the stateless era through serveInput, which turns the input the call
// needs into input_required answers (see mrtr.go).
func (cr *callRouter) callTool(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) (any, *protocol.Error) {
	params := r.Params
	p, ok := scanCallParams(params)
	if !ok {
		if err := json.Unmarshal(params, &p); err != nil {
			p.Name = ""
		}
	}
	if p.Name == "" {
		return nil, errorf(protocol.CodeInvalidParams, "tools/call: want {name, arguments}")
	}
	if t, ok := cr.features.tool(p.Name); ok {
		if !cr.gate.offered(p.Name) {
			return nil, errorf(protocol.CodeInvalidParams, "unknown tool %q", p.Name)
		}
		return callHostTool(ctx, t, p.Arguments)
	}
	if p.Name == waitToolName && cr.chans.inbox != nil && cr.gate.offered(waitToolName) {
		return cr.chans.wait(ctx, r.Session, p.Arguments)
	}
	if res, perr, ok := cr.pages.call(ctx, p.Name, p.Arguments); ok {
		return res, perr
	}
	if res, perr, ok := cr.search.call(ctx, w, r, p.Name, p.Arguments); ok {
		return res, perr
	}
	qualified := cr.naming.qualifiedTool(p.Name)
	if _, known := cr.naming.current().server[qualified]; !known {
		// Maybe a tool of a server still starting (startup.go).
		qualified = cr.startup.notYetListed(ctx, p.Name, qualified)
	}
	if !cr.gate.offered(qualified) {
		return nil, errorf(protocol.CodeInvalidParams, "unknown tool %q", qualified)
	}
	if perr := cr.front.adminTool(ctx, qualified); perr != nil {
		return nil, perr
	}
	run := func(ctx context.Context) (any, *protocol.Error) {
		return cr.runCall(ctx, w, r, qualified, p)
	}
	if requestOf(ctx) != nil {
		return cr.inputs.serve(ctx, protocol.MethodToolsCall, p.Name, params, run)
	}
	return run(ctx)
}

// runCall calls tool name (qualified) with p's arguments, declaring the
// client's capabilities to the server, and passes progress reports on.
func (cr *callRouter) runCall(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request, name string, p protocol.CallToolParams) (any, *protocol.Error) {
	server := cr.naming.serverOfTool(name)
	auditServer(ctx, server, name)
	c := &call{w: w, s: r.Session, server: server, input: inputCallOf(ctx), who: ctx}
	ctx = context.WithValue(ctx, callKey{}, c)
	cr.calls.started(c)
	defer cr.calls.ended(c)
	start := time.Now()
	var res *protocol.CallToolResult
	var err error
	var token json.RawMessage
	if p.Meta != nil {
		token = p.Meta[protocol.MetaProgressToken]
	}
	var args any
	if p.Arguments != nil {
		args = p.Arguments
	}
	caps := r.Capabilities()
	if pc, ok := cr.b.(ProgressCaller); ok {
		o := mcpvisor.CallOptions{Capabilities: &caps, Meta: forwardedMeta(p.Meta)}
		if token != nil {
			// The server's reports carry mcpvisor's token; downstream
			// they carry the client's.
			o.Progress = func(pp protocol.ProgressParams) {
				pp.ProgressToken = token
				pp.Meta = nil
				w.Notify(protocol.NotificationProgress, pp)
			}
		}
		res, err = pc.CallToolWith(ctx, name, args, o)
	} else {
		res, err = cr.b.CallTool(ctx, name, args)
	}
	cr.metrics.call(server, time.Since(start), err)
	if err != nil {
		return nil, rpcError(err)
	}
	if res.ResultType == protocol.ResultTask {
		return cr.pool.taskCreated(server, cr.view.taskTag(ctx), res), nil
	}
	res = cr.pages.fitResult(ownerOf(ctx), name, server, p.Meta, res)
	if enc, ok := appendTextResult(nil, res); ok {
		return enc, nil
	}
	return res, nil
}

// appendTextResult encodes the common result of text blocks only without
// reflection (the per-call hot path); it reports false for anything else,
// which encoding/json encodes.
func appendTextResult(b []byte, r *protocol.CallToolResult) (protocol.ValidJSON, bool) {
	if r.Meta != nil || r.StructuredContent != nil || r.ResultType != "" || r.Extra != nil {
		return nil, false
	}
	for i := range r.Content {
		c := &r.Content[i]
		if c.Type != protocol.ContentText || c.Meta != nil || c.Annotations != nil || c.Data != "" || c.MimeType != "" ||
			c.URI != "" || c.Name != "" || c.Title != "" || c.Description != "" || c.Size != nil || c.Icons != nil || c.Resource != nil {
			return nil, false
		}
	}
	b = append(b, `{"content":[`...)
	for i := range r.Content {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"text","text":`...)
		b = protocol.AppendString(b, r.Content[i].Text)
		b = append(b, '}')
	}
	b = append(b, ']')
	if r.IsError {
		b = append(b, `,"isError":true`...)
	}
	return append(b, '}'), true
}

// scanCallParams reads tools/call params without reflection (the per-call
// hot path): name, arguments and _meta. Of _meta it keeps what the
// gateway reads or passes on (callMeta): the stateless era's protocol
// keys, which mcpserver has already read into the Request, are left out,
// so a call that carries nothing else has no Meta at all. It reports false
// when encoding/json must decide.
func scanCallParams(params json.RawMessage) (protocol.CallToolParams, bool) {
	var p protocol.CallToolParams
	name, ok := protocol.PlainStringMember(params, "name")
	if !ok {
		return p, false
	}
	args, _, ok := protocol.RawMember(params, "arguments")
	if !ok {
		return p, false
	}
	meta, hasMeta, ok := protocol.RawMember(params, "_meta")
	if !ok {
		return p, false
	}
	if hasMeta && string(meta) != "null" {
		if p.Meta, ok = callMeta(meta); !ok {
			return p, false
		}
	}
	if string(args) == "null" {
		args = nil
	}
	p.Name, p.Arguments = name, args
	return p, true
}

// callMeta reads a request's _meta object the way encoding/json decodes
// it into a protocol.Meta (the last of repeated keys wins), leaving out
// the stateless era's protocol keys (eraMeta). It returns nil when nothing
// is left, and reports false when encoding/json must decide (a key with
// escapes or bytes outside ASCII, or not an object).
func callMeta(raw json.RawMessage) (protocol.Meta, bool) {
	var m protocol.Meta
	ok := protocol.EachMember(raw, func(k, v []byte) bool {
		if isEraMeta(k) {
			return true
		}
		if m == nil {
			m = protocol.Meta{}
		}
		m[string(k)] = json.RawMessage(v)
		return true
	})
	return m, ok
}

// listPrompts lists the host's prompts, then the pool's under their
// downstream names.
func (pl *pool) listPrompts() protocol.ListPromptsResult {
	ps := listPrompts(pl.b)
	idx := pl.naming.current()
	for _, p := range ps {
		if !idx.prompts[p.Name] { // a prompt added since the index was built
			pl.naming.reset()
			idx = pl.naming.current()
			break
		}
	}
	host := pl.features.promptList()
	out := make([]protocol.Prompt, 0, len(host)+len(ps))
	hidden := map[string]bool{} // the host's names hide the pool's
	for _, def := range host {
		hidden[def.Name] = true
		out = append(out, def)
	}
	for _, p := range ps {
		def := p.Prompt
		def.Name = p.Name
		if n, ok := idx.promptOut[p.Name]; ok {
			def.Name = n
		}
		if hidden[def.Name] {
			continue
		}
		if idx.shortened[p.Name] {
			def.Meta = withOriginal(def.Meta, p.Server, p.Prompt.Name)
		}
		out = append(out, def)
	}
	return protocol.ListPromptsResult{Prompts: out}
}

// getPrompt renders a prompt (by its downstream name); for a client of
// the stateless era through serveInput, like callTool.
func (cr *callRouter) getPrompt(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) (any, *protocol.Error) {
	params := r.Params
	var p protocol.GetPromptParams
	if err := json.Unmarshal(params, &p); err != nil || p.Name == "" {
		return nil, errorf(protocol.CodeInvalidParams, "prompts/get: want {name, arguments}")
	}
	if hp, ok := cr.features.prompt(p.Name); ok {
		res, err := hp.Handler(ctx, p.Arguments)
		if err != nil {
			return nil, rpcError(err)
		}
		if res == nil || res.Messages == nil {
			return nil, errorf(protocol.CodeInternalError, "prompt %q rendered no messages", p.Name)
		}
		return res, nil
	}
	name := p.Name
	if q, ok := cr.naming.current().promptIn[name]; ok {
		name = q
	}
	run := func(ctx context.Context) (any, *protocol.Error) {
		c := &call{w: w, s: r.Session, server: cr.pool.serverOfPrompt(name), input: inputCallOf(ctx), who: ctx}
		auditServer(ctx, c.server, name)
		ctx = context.WithValue(ctx, callKey{}, c)
		cr.calls.started(c)
		defer cr.calls.ended(c)
		var res *protocol.GetPromptResult
		var err error
		if src, ok := cr.b.(PromptSource); ok {
			caps := r.Capabilities()
			res, err = src.Prompts().GetWith(ctx, name, p.Arguments, mcpvisor.RequestOptions{Capabilities: &caps, Meta: forwardedMeta(p.Meta)})
		} else {
			err = fmt.Errorf("%w: %q (this backend offers no prompts)", mcpvisor.ErrUnknownPrompt, name)
		}
		if err != nil {
			return nil, rpcError(err)
		}
		return res, nil
	}
	if requestOf(ctx) != nil {
		return cr.inputs.serve(ctx, protocol.MethodPromptsGet, p.Name, params, run)
	}
	return run(ctx)
}

// serverOfPrompt returns the server behind a prompt's qualified name.
func (pl *pool) serverOfPrompt(name string) string {
	prompts := listPrompts(pl.b)
	for _, p := range prompts {
		if p.Name == name {
			return p.Server
		}
	}
	return ""
}

// listResources lists the host's resources, then every server's with
// their own URIs. When two list the same URI, the host's, else the first
// by server name, is listed (and read).
func (pl *pool) listResources() protocol.ListResourcesResult {
	rs, _ := listResources(pl.b)
	host := pl.features.resourceList()
	out := make([]protocol.Resource, 0, len(host)+len(rs))
	seen := map[string]bool{}
	for _, r := range host {
		seen[r.URI] = true
		out = append(out, r)
	}
	for _, r := range rs {
		if seen[r.Resource.URI] {
			continue
		}
		seen[r.Resource.URI] = true
		out = append(out, r.Resource)
	}
	return protocol.ListResourcesResult{Resources: out}
}

func (pl *pool) listTemplates() protocol.ListResourceTemplatesResult {
	_, ts := listResources(pl.b)
	out := make([]protocol.ResourceTemplate, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Template)
	}
	return protocol.ListResourceTemplatesResult{ResourceTemplates: out}
}

// serverOfResource finds the server that offers uri: one listing it, else
// one whose template's literal prefix it starts with (the longest).
func (pl *pool) serverOfResource(uri string) string {
	rs, ts := listResources(pl.b)
	for _, r := range rs {
		if r.Resource.URI == uri {
			return r.Server
		}
	}
	best, bestLen := "", -1
	for _, t := range ts {
		prefix, _, _ := strings.Cut(t.Template.URITemplate, "{")
		if strings.HasPrefix(uri, prefix) && len(prefix) > bestLen {
			best, bestLen = t.Server, len(prefix)
		}
	}
	return best
}

// readResource reads a resource from the server that offers it; for a
// client of the stateless era through serveInput, like callTool. An
// unknown URI is -32602 in the stateless era (SEP-2164), -32002 before.
func (cr *callRouter) readResource(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) (any, *protocol.Error) {
	params := r.Params
	var p protocol.ReadResourceParams
	if err := json.Unmarshal(params, &p); err != nil || p.URI == "" {
		return nil, errorf(protocol.CodeInvalidParams, "resources/read: want {uri}")
	}
	if hr, ok := cr.features.resource(p.URI); ok {
		res, err := hr.Handler(ctx, p.URI)
		if err != nil {
			return nil, rpcError(err)
		}
		if res == nil || res.Contents == nil {
			return nil, errorf(protocol.CodeInternalError, "resource %q read no contents", p.URI)
		}
		return res, nil
	}
	server := cr.pool.serverOfResource(p.URI)
	if server == "" {
		code := int64(protocol.CodeResourceNotFound)
		if requestOf(ctx) != nil {
			code = protocol.CodeInvalidParams
		}
		e := errorf(code, "resource not found: %s", p.URI)
		e.Data, _ = json.Marshal(map[string]string{"uri": p.URI})
		return nil, e
	}
	run := func(ctx context.Context) (any, *protocol.Error) {
		c := &call{w: w, s: r.Session, server: server, input: inputCallOf(ctx), who: ctx}
		auditServer(ctx, server, "")
		ctx = context.WithValue(ctx, callKey{}, c)
		cr.calls.started(c)
		defer cr.calls.ended(c)
		var res *protocol.ReadResourceResult
		var err error
		if src, ok := cr.b.(ResourceSource); ok {
			caps := r.Capabilities()
			res, err = src.Resources().ReadWith(ctx, server, p.URI, mcpvisor.RequestOptions{Capabilities: &caps, Meta: forwardedMeta(p.Meta)})
		} else {
			err = fmt.Errorf("%w: %q (this backend offers no resources)", mcpvisor.ErrUnknownServer, server)
		}
		if err != nil {
			return nil, rpcError(err)
		}
		return res, nil
	}
	if requestOf(ctx) != nil {
		return cr.inputs.serve(ctx, protocol.MethodResourcesRead, p.URI, params, run)
	}
	return run(ctx)
}

// fanout sends what the bus carries to the downstream sessions: list
// changes, log messages, resource updates and channel messages.
//
// Concurrency: called by Run's goroutine only; the MCP server (srv)
// queues each notification on every session's bounded stream, never
// blocking on a slow client.
type fanout struct {
	srv     *mcpserver.Server
	metrics *metrics
	log     zerolog.Logger
	// audience returns who may get a notification about a server: the
	// sessions and listen streams whose caller the access rules let use
	// it (accessview.go).
	audience func(server string) mcpserver.Audience
}

// broadcastListChanged sends a list_changed notification to every
// session and every listen stream that selected it, of those a accepts
// (nil: all).
func (fo *fanout) broadcastListChanged(method string, a mcpserver.Audience) {
	n := fo.srv.ListChangedTo(method, a)
	fo.metrics.notified(method, n)
	fo.log.Debug().Str("method", method).Int("recipients", n).Msg("list changed sent downstream")
}

// forwardLog sends a server's log message to the sessions whose level it
// reaches (and whose callers may use the server), as notifications/message with logger = the server's name (and
// to the listen streams whose _meta asked for that level).
func (fo *fanout) forwardLog(ev *mcpvisor.LogMessageEvent) {
	var p protocol.LoggingMessageParams
	if json.Unmarshal(ev.Data, &p) != nil {
		return
	}
	p.Meta = nil
	if p.Logger == "" {
		p.Logger = ev.Server
	} else {
		p.Logger = ev.Server + "/" + p.Logger
	}
	fo.srv.LogTo(p, fo.audience(ev.Server))
}

// forwardResourceUpdated tells the sessions and listen streams
// subscribed to the resource (whose callers may use its server).
func (fo *fanout) forwardResourceUpdated(ev *mcpvisor.ResourceUpdatedEvent) {
	fo.srv.ResourceUpdatedTo(ev.URI, fo.audience(ev.Server))
}
