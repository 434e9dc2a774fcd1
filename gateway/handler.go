package gateway

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// ServeMCP serves one request of a downstream client that the MCP server
// does not answer itself (it answers initialize, server/discover, ping,
// logging/setLevel and subscriptions/listen): the pool's tools, prompts
// and resources, resource subscriptions, completions, and the
// extensions passed on to the servers (tasks, skills). It implements
// mcpserver.Handler, and answers before it returns.
func (g *Gateway) ServeMCP(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
	if r.Meta != nil {
		ctx = context.WithValue(ctx, requestKey{}, r.Meta)
	}
	result, perr := g.serve(ctx, w, r)
	if perr != nil {
		w.Error(perr)
		return
	}
	w.Reply(result)
}

// serve serves request r.
func (g *Gateway) serve(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) (any, *protocol.Error) {
	switch r.Method {
	case protocol.MethodToolsList, protocol.MethodPromptsList, protocol.MethodResourcesList, protocol.MethodResourcesTemplatesList:
		// During start-up a list waits for the servers configured at
		// start (startup.go).
		g.startup.await(ctx)
	}
	switch r.Method {
	case protocol.MethodToolsCall, protocol.MethodPromptsGet, protocol.MethodResourcesRead, protocol.MethodResourcesSubscribe:
		// The caller's access rules and rate limit (accessgate.go).
		release, perr := g.gate.admit(ctx, r.Method, r.Params)
		if perr != nil {
			return nil, perr
		}
		defer release()
	}
	switch r.Method {
	case protocol.MethodToolsList:
		return g.gate.visibleTools(ctx, g.listTools(ctx)), nil
	case protocol.MethodToolsCall:
		return g.router.callTool(ctx, w, r)
	case protocol.MethodPromptsList:
		return g.gate.visiblePrompts(ctx, g.pool.listPrompts()), nil
	case protocol.MethodPromptsGet:
		return g.router.getPrompt(ctx, w, r)
	case protocol.MethodResourcesList:
		return g.gate.visibleResources(ctx, g.pool.listResources()), nil
	case protocol.MethodResourcesTemplatesList:
		return g.gate.visibleTemplates(ctx, g.pool.listTemplates()), nil
	case protocol.MethodResourcesRead:
		return g.router.readResource(ctx, w, r)
	case protocol.MethodResourcesSubscribe, protocol.MethodResourcesUnsubscribe:
		return g.subscribe(ctx, r.Session, r.Method == protocol.MethodResourcesSubscribe, r.Params)
	case protocol.MethodCompletionComplete:
		return g.pool.complete(ctx, r.Params, g.view.refuseServer)
	case protocol.MethodTasksGet, protocol.MethodTasksUpdate, protocol.MethodTasksCancel:
		return g.taskRequest(ctx, r)
	case protocol.MethodSkillsList, protocol.MethodSkillsGet, protocol.MethodResourcesDirectoryRead:
		return g.pool.skillsRequest(ctx, r, g.view.serverFilter(ctx))
	}
	return nil, errorf(protocol.CodeMethodNotFound, "method not found: %s", r.Method)
}

// requestKey is the context key of a stateless-era request's _meta.
type requestKey struct{}

// requestOf returns what the _meta of the stateless-era request being
// served says, or nil for a request of a handshake-era session.
func requestOf(ctx context.Context) *mcpserver.Meta {
	m, _ := ctx.Value(requestKey{}).(*mcpserver.Meta)
	return m
}

// subscribe records a resource subscription of session s; the gateway
// holds the URI subscribed upstream while any session wants it.
func (g *Gateway) subscribe(ctx context.Context, s *mcpserver.Session, on bool, params json.RawMessage) (any, *protocol.Error) {
	var p protocol.SubscribeParams
	if err := json.Unmarshal(params, &p); err != nil || p.URI == "" {
		return nil, errorf(protocol.CodeInvalidParams, "want {uri}")
	}
	if !on {
		s.Unsubscribe(p.URI)
		if perr := g.subs.release(ctx, s, p.URI); perr != nil {
			return nil, perr
		}
		return struct{}{}, nil
	}
	if err := s.CheckSubscribe(p.URI); err != nil { // within the session's bound, before anything upstream
		return nil, subscribeError(err)
	}
	if perr := g.subs.acquire(ctx, s, p.URI); perr != nil {
		return nil, perr
	}
	if err := s.Subscribe(p.URI); err != nil {
		g.subs.releaseAll(s, []string{p.URI}) // closed meanwhile, or refused at the session's byte bound
		return nil, subscribeError(err)
	}
	return struct{}{}, nil
}

// subscribeError is the answer to a subscription Session.Subscribe
// refused: its bound's error, or the session's end.
func subscribeError(err error) *protocol.Error {
	var perr *protocol.Error
	if errors.As(err, &perr) {
		return perr
	}
	return errorf(protocol.CodeInvalidRequest, "%v", err)
}

// hold subscribes upstream the resources a listen stream selected, and
// returns what releases them when the stream ends.
func (rs *resourceSubs) hold(ctx context.Context, uris []string) func() {
	if len(uris) == 0 {
		return nil
	}
	owner := new(listenOwner)
	var held []string
	for _, uri := range uris {
		if rs.acquire(ctx, owner, uri) == nil {
			held = append(held, uri)
		}
	}
	return func() { rs.releaseAll(owner, held) }
}

// listenOwner stands for one listen stream among the owners of an
// upstream subscription.
type listenOwner struct{ _ byte }
