package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway/access"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// ErrAccessDenied is matched (errors.Is) by the error of a request the
// access rules (Options.Access) refuse its caller; downstream it is the
// JSON-RPC error CodeAccessDenied.
var ErrAccessDenied = errors.New("gateway: access denied")

// ErrRateLimited is matched (errors.Is) by the error of a call over its
// caller's rate limit (it is access.ErrRateLimited; errors.As gives the
// *access.LimitError with RetryAfter); downstream it is the JSON-RPC
// error CodeRateLimited.
var ErrRateLimited = access.ErrRateLimited

// The access rules' JSON-RPC error codes.
const (
	// CodeAccessDenied: the access rules do not let the caller use the
	// tool, prompt or resource (or, for a management tool, the caller is
	// not an admin). Data: {"reason": "access", "server": …}.
	CodeAccessDenied = -32054
	// CodeRateLimited: the caller is over its rate limit. Data:
	// {"reason": "rate" or "concurrent", "retryAfterMs": N,
	// "retryable": true}; over HTTP, a stateless request is answered
	// 429 with Retry-After (seconds, rounded up).
	CodeRateLimited = -32055
)

// accessGate is the access rules' one job: who the caller of a request
// is (callerOf), what it may see of the lists and call (Options.Allow and
// Deny, then the rules), and its rate limit (admit).
//
// Concurrency: safe for concurrent use by every request's goroutine: the
// policy is an atomic pointer to an immutable Policy (SetAccess swaps
// it), the limiter has its own lock, and the other fields are set by New
// and only read after (the namer, pool and Features guard their own
// state).
type accessGate struct {
	policy  atomic.Pointer[access.Policy]
	limiter *access.Limiter

	opts     Options   // Allow and Deny (offered)
	b        Backend   // the pool's prompts and templates, by server
	naming   *namer    // the names between the pool and downstream
	pool     *pool     // the server of a resource or prompt
	features *Features // the host's own tools, prompts and resources (may be nil)
	front    *front    // its resource server (front.rs) names the operator's scope
}

func newAccessGate(opts Options, b Backend, naming *namer, p *pool, fr *front) *accessGate {
	a := &accessGate{
		limiter: access.NewLimiter(access.LimiterOptions{Now: opts.AccessNow}),
		opts:    opts, b: b, naming: naming, pool: p, features: opts.Features, front: fr,
	}
	a.policy.Store(opts.Access)
	return a
}

// SetAccess replaces the access rules and rate limits (nil: none), as a
// reload of the configuration does. Requests being served keep the rules
// they started with; the callers' rate-limit state carries over. Safe
// for concurrent use.
func (g *Gateway) SetAccess(p *access.Policy) { g.gate.policy.Store(p) }

// caller is a request's caller as the access rules see it.
type caller struct {
	key      string       // rate-limit key
	grant    access.Grant // what the rules let it use
	limit    access.Limit
	admin    bool // may use the admin actions (the management tools)
	gated    bool // the management tools need admin
	anything bool // no rule applies: the fast path
}

// callerOf evaluates the access rules for ctx's caller: its Identity
// (IdentityFrom), the anonymous caller when it has none (stdio, or HTTP
// without authentication; the static token without a ResourceServer
// names nobody either). The static token beside a ResourceServer is the
// operator: no rule restricts it and it is an admin. Once a rule sets
// admin, the pool's built-in tools (the management tools of `supervise
// --management-tools`) are hidden from and refused to a caller that is
// no admin: one such rule matches, holding the resource server's admin
// scope when there is one. (The resource server's own check,
// ResourceServer.AdminTools, applies besides.)
func (g *accessGate) callerOf(ctx context.Context) caller {
	p := g.policy.Load()
	rs := g.front.rs
	if p == nil && rs == nil {
		return caller{anything: true, admin: true}
	}
	id, _ := IdentityFrom(ctx)
	aid := access.Identity{Subject: id.Subject, ClientID: id.ClientID, Groups: id.Groups, Roles: id.Roles, Scopes: id.Scopes}
	c := caller{key: aid.Key(), gated: p.AdminRules()}
	if ctx.Value(operatorKey{}) != nil {
		c.grant, c.admin = (*access.Policy)(nil).For(aid), true
		c.limit = p.For(aid).Limit()
		return c
	}
	c.grant = p.For(aid)
	c.limit = c.grant.Limit()
	scopeOK := rs == nil || slices.Contains(id.Scopes, rs.AdminScope)
	c.admin = scopeOK && c.grant.Admin()
	return c
}

// toolFor reports whether c may see and call the tool named qualified (a
// pool name, or the host's own tool's name).
func (g *accessGate) toolFor(c *caller, idx *nameIndex, qualified string) bool {
	if c.anything {
		return true
	}
	server, inPool := idx.server[qualified]
	if !inPool {
		_, host := g.features.tool(qualified)
		if !host && ownTool(qualified) {
			return true // what it reaches is checked on its own
		}
		if !host && qualified != waitToolName {
			server = g.naming.serverOfTool(qualified) // a tool not listed yet
		}
	} else if server == "" && c.gated && !c.admin {
		return false // a built-in: the management tools
	}
	return c.grant.Tool(server, qualified)
}

// ownTool reports whether name is one of the gateway's tools that reach
// only what the caller may use: the search tools and the result pages.
// The access rules let every caller use them, and they cost no rate
// limit (they call no server); what they reach is checked on its own
// (search finds, describe_tools describes and call_tool calls only what
// the caller may use; a result page is its own call's). The channel wait
// is not one: it delivers every server's channel messages, so it is the
// gateway's server "" to the rules.
func ownTool(name string) bool {
	switch name {
	case searchToolName, describeToolName, callToolName, pageToolName:
		return true
	}
	return false
}

// allowedFor returns what reports whether ctx's caller may see and call
// the tool named name (its pool name, mcp__<server>__<tool>, or the
// host's own tool's name), after Options.Allow and Deny and the access
// rules. Search (search_tools, call_tool) filters what it finds, and
// checks what it calls, with it. The func is for one request: it holds
// the caller's grant and the name index of the moment.
func (g *accessGate) allowedFor(ctx context.Context) func(name string) bool {
	c := g.callerOf(ctx)
	if c.anything {
		return g.offered
	}
	idx := g.naming.current()
	return func(name string) bool { return g.offered(name) && g.toolFor(&c, idx, name) }
}

// visibleTools keeps of res (a tools/list answer, downstream names) what
// ctx's caller may use.
func (g *accessGate) visibleTools(ctx context.Context, res protocol.ListToolsResult) protocol.ListToolsResult {
	c := g.callerOf(ctx)
	if c.anything {
		return res
	}
	idx := g.naming.current()
	out := res.Tools[:0:0]
	for _, t := range res.Tools {
		q := t.Name
		if _, host := g.features.tool(q); !host {
			if in, ok := idx.toolIn[q]; ok {
				q = in
			}
		}
		if g.toolFor(&c, idx, q) {
			out = append(out, t)
		}
	}
	res.Tools = out
	return res
}

// visiblePrompts keeps of res what ctx's caller may use (by server).
func (g *accessGate) visiblePrompts(ctx context.Context, res protocol.ListPromptsResult) protocol.ListPromptsResult {
	c := g.callerOf(ctx)
	if c.anything {
		return res
	}
	hidden := map[string]bool{}
	if ps := listPrompts(g.b); ps != nil {
		idx := g.naming.current()
		for _, p := range ps {
			if !c.grant.Server(p.Server) {
				n := p.Name
				if out, ok := idx.promptOut[p.Name]; ok {
					n = out
				}
				hidden[n] = true
			}
		}
	}
	hostOK := c.grant.Server("")
	out := res.Prompts[:0:0]
	for _, p := range res.Prompts {
		if _, host := g.features.prompt(p.Name); host && !hostOK || !host && hidden[p.Name] {
			continue
		}
		out = append(out, p)
	}
	res.Prompts = out
	return res
}

// visibleResources keeps of res what ctx's caller may use (by server).
func (g *accessGate) visibleResources(ctx context.Context, res protocol.ListResourcesResult) protocol.ListResourcesResult {
	c := g.callerOf(ctx)
	if c.anything {
		return res
	}
	out := res.Resources[:0:0]
	for _, r := range res.Resources {
		if c.grant.Server(g.serverOfURI(r.URI)) {
			out = append(out, r)
		}
	}
	res.Resources = out
	return res
}

// visibleTemplates keeps the templates of the servers ctx's caller may
// use.
func (g *accessGate) visibleTemplates(ctx context.Context, res protocol.ListResourceTemplatesResult) protocol.ListResourceTemplatesResult {
	c := g.callerOf(ctx)
	if c.anything {
		return res
	}
	_, ts := listResources(g.b)
	allowed := map[string]bool{}
	for _, t := range ts {
		if c.grant.Server(t.Server) {
			allowed[t.Template.URITemplate] = true
		}
	}
	out := res.ResourceTemplates[:0:0]
	for _, t := range res.ResourceTemplates {
		if allowed[t.URITemplate] {
			out = append(out, t)
		}
	}
	res.ResourceTemplates = out
	return res
}

// serverOfURI is the server behind a resource's URI ("" for the host's).
func (g *accessGate) serverOfURI(uri string) string {
	if _, host := g.features.resource(uri); host {
		return ""
	}
	return g.pool.serverOfResource(uri)
}

// admit checks a call (tools/call, prompts/get, resources/read) of ctx's
// caller against the access rules and its rate limit; what it returns
// must be called when the call ends. A refusal is CodeAccessDenied or
// CodeRateLimited.
func (g *accessGate) admit(ctx context.Context, method string, params json.RawMessage) (func(), *protocol.Error) {
	c := g.callerOf(ctx)
	if c.anything {
		return func() {}, nil
	}
	what, server, ok := "", "", true
	name := "" // the pool name of the tool or prompt, for the audit trail
	switch method {
	case protocol.MethodToolsCall:
		p, scanned := scanCallParams(params)
		if !scanned {
			_ = json.Unmarshal(params, &p)
		}
		if p.Name == "" {
			return func() {}, nil // callTool answers
		}
		q := p.Name
		_, host := g.features.tool(q)
		if !host && ownTool(q) {
			// The gateway's own tools call no server and cost no
			// limit; the call call_tool makes is admitted itself
			// (searchMode.callByName).
			return func() {}, nil
		}
		if !host && q != waitToolName {
			q = g.naming.qualifiedTool(q)
		}
		idx := g.naming.current()
		what, server, name, ok = "tool "+strconv.Quote(p.Name), idx.server[q], q, g.toolFor(&c, idx, q)
	case protocol.MethodPromptsGet:
		var p protocol.GetPromptParams
		if json.Unmarshal(params, &p) != nil || p.Name == "" {
			return func() {}, nil
		}
		if _, host := g.features.prompt(p.Name); !host {
			q := p.Name
			if in, found := g.naming.current().promptIn[q]; found {
				q = in
			}
			server, name = g.pool.serverOfPrompt(q), q
		}
		what, ok = "prompt "+strconv.Quote(p.Name), c.grant.Server(server)
	case protocol.MethodResourcesRead, protocol.MethodResourcesSubscribe:
		var p protocol.ReadResourceParams
		if json.Unmarshal(params, &p) != nil || p.URI == "" {
			return func() {}, nil
		}
		server = g.serverOfURI(p.URI)
		what, ok = "resource "+strconv.Quote(p.URI), c.grant.Server(server)
	}
	if server != "" {
		// A refused call is on the trail with the server and pool name
		// it resolved to, as an admitted one is (runCall notes them).
		auditServer(ctx, server, name)
	}
	if !ok {
		return nil, accessDenied(what, server)
	}
	if method == protocol.MethodResourcesSubscribe {
		return func() {}, nil
	}
	release, err := g.limiter.Acquire(c.key, c.limit)
	if err != nil {
		return nil, g.limitError(ctx, err)
	}
	return release, nil
}

// limitError is the answer to a call over its rate limit; a stateless
// request over HTTP is marked for a 429 (limitStatus).
func (g *accessGate) limitError(ctx context.Context, err error) *protocol.Error {
	var le *access.LimitError
	if !errors.As(err, &le) {
		return errorf(CodeRateLimited, "%v", err)
	}
	ms := max(le.RetryAfter.Milliseconds(), 1)
	e := errorf(CodeRateLimited, "%v", err)
	e.Data, _ = json.Marshal(map[string]any{"reason": le.Kind, "retryAfterMs": ms, "retryable": true})
	if slot, ok := ctx.Value(refusalKey{}).(*atomic.Int64); ok && requestOf(ctx) != nil {
		slot.Store(ms)
	}
	return e
}

// refusalKey is the context key of an HTTP request's rate-limit slot
// (an *atomic.Int64: the retry delay in ms, set when a stateless request
// was refused for its rate limit).
type refusalKey struct{}

// limitStatus answers a stateless MCP request its rate limit refused 429
// with Retry-After instead of 200 (the body stays the JSON-RPC error).
func limitStatus(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		slot := new(atomic.Int64)
		next.ServeHTTP(&limitWriter{ResponseWriter: w, slot: slot}, r.WithContext(context.WithValue(r.Context(), refusalKey{}, slot)))
	})
}

// limitWriter turns the status of a refused request into 429.
type limitWriter struct {
	http.ResponseWriter
	slot  *atomic.Int64
	wrote bool
}

func (lw *limitWriter) WriteHeader(status int) {
	if !lw.wrote {
		lw.wrote = true
		if ms := lw.slot.Load(); ms > 0 && status == http.StatusOK {
			lw.Header().Set("Retry-After", strconv.FormatInt((ms+999)/1000, 10))
			status = http.StatusTooManyRequests
		}
	}
	lw.ResponseWriter.WriteHeader(status)
}

func (lw *limitWriter) Write(b []byte) (int, error) {
	if !lw.wrote {
		lw.WriteHeader(http.StatusOK)
	}
	return lw.ResponseWriter.Write(b)
}

// Flush passes a flush on (event streams).
func (lw *limitWriter) Flush() {
	if !lw.wrote {
		lw.WriteHeader(http.StatusOK)
	}
	if f, ok := lw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (lw *limitWriter) Unwrap() http.ResponseWriter { return lw.ResponseWriter }

// StatusFor is Status as ctx's caller may see it: the servers (and
// excluded servers) the access rules let it use, and the count and
// token estimate of the tools they let it use; the gateway-wide figures
// are the operator's only (a restricted caller gets the count of its own
// sessions, no calls in flight, no skipped layer files, and the channel
// queue of its servers only).
func (g *Gateway) StatusFor(ctx context.Context) StatusReport {
	rep := g.Status()
	c := g.gate.callerOf(ctx)
	if c.anything {
		return rep
	}
	rep.Servers = slices.DeleteFunc(rep.Servers, func(s ServerReport) bool { return !c.grant.Server(s.Name) })
	// rep.Excluded is shared (SetExcluded replaces it whole): filter a copy.
	rep.Excluded = slices.DeleteFunc(slices.Clone(rep.Excluded), func(e ExcludedReport) bool { return !c.grant.Server(e.Name) })
	allowed := g.gate.allowedFor(ctx)
	var pool []mcpvisor.Tool
	for _, t := range g.b.Tools() {
		if allowed(t.Name) {
			pool = append(pool, t)
		}
	}
	rep.Tools = len(pool)
	tokens, total := toolTokens(pool, g.gate.offered)
	rep.ToolTokens = total
	for i := range rep.Servers {
		rep.Servers[i].ToolTokens = tokens[rep.Servers[i].Name]
	}
	g.view.restrictStatus(ctx, &c, &rep)
	return rep
}

// Refusal returns err as an error of the access rules when it is one: a
// JSON-RPC error (*protocol.Error, as a client of the gateway receives
// it) with CodeAccessDenied becomes an error matching ErrAccessDenied,
// one with CodeRateLimited a *access.LimitError (RetryAfter from its
// data) matching ErrRateLimited. Any other err is returned as it is.
func Refusal(err error) error {
	var e *protocol.Error
	if !errors.As(err, &e) {
		return err
	}
	switch e.Code {
	case CodeAccessDenied:
		return fmt.Errorf("%w (%s)", ErrAccessDenied, e.Message)
	case CodeRateLimited:
		var d struct {
			Reason       string `json:"reason"`
			RetryAfterMs int64  `json:"retryAfterMs"`
		}
		_ = json.Unmarshal(e.Data, &d)
		return &access.LimitError{Kind: d.Reason, RetryAfter: time.Duration(d.RetryAfterMs) * time.Millisecond}
	}
	return err
}
