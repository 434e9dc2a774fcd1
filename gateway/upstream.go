package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// What passes between the downstream clients and the servers behind the
// gateway besides plain requests: resource subscriptions (counted, so a
// server is subscribed while any downstream session or listen stream
// wants the resource), and the servers' requests to their client
// (sampling, elicitation, roots), asked of a downstream client.

// subRef is one upstream resource subscription: the server it was made
// on and who downstream wants it.
type subRef struct {
	server string
	owners map[any]struct{} // *mcpserver.Session or *listenOwner
}

// resourceSubs are the gateway's upstream resource subscriptions: a URI
// is subscribed on its server while any downstream session or listen
// stream wants it.
//
// Concurrency: safe for concurrent use; mu guards refs and serializes
// the upstream calls.
type resourceSubs struct {
	b   Backend
	log zerolog.Logger
	// serverOf returns the server that offers a URI ("" for none).
	serverOf func(uri string) string

	mu   sync.Mutex         // serializes upstream (un)subscriptions
	refs map[string]*subRef // upstream resource subscriptions by URI; guarded by mu
}

func newResourceSubs(b Backend, log zerolog.Logger, serverOf func(string) string) *resourceSubs {
	return &resourceSubs{b: b, log: log, serverOf: serverOf, refs: map[string]*subRef{}}
}

// acquire records that owner wants updates of uri, subscribing
// upstream when it is the first. Subscriptions are serialized by mu,
// upstream calls included, so that a subscribe and an unsubscribe of the
// same URI never cross on the way to the server.
func (rs *resourceSubs) acquire(ctx context.Context, owner any, uri string) *protocol.Error {
	src, ok := rs.b.(ResourceSource)
	if !ok {
		return nil
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if ref := rs.refs[uri]; ref != nil {
		ref.owners[owner] = struct{}{}
		return nil
	}
	server := rs.serverOf(uri)
	if server == "" {
		return errorf(protocol.CodeInvalidParams, "no server offers resource %q", uri)
	}
	if err := src.Resources().Subscribe(ctx, server, uri); err != nil {
		if errors.Is(err, mcpvisor.ErrSubscribeUnsupported) {
			return errorf(protocol.CodeInvalidParams, "resource %q: server %q does not offer subscriptions", uri, server)
		}
		if errors.Is(err, mcpvisor.ErrSubscriptionRefused) {
			return errorf(protocol.CodeInvalidParams, "resource %q: server %q refused the subscription", uri, server)
		}
		return rpcError(err)
	}
	rs.refs[uri] = &subRef{server: server, owners: map[any]struct{}{owner: {}}}
	return nil
}

// release forgets that owner wants uri, unsubscribing upstream when
// nobody else does.
func (rs *resourceSubs) release(ctx context.Context, owner any, uri string) *protocol.Error {
	src, ok := rs.b.(ResourceSource)
	if !ok {
		return nil
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	ref := rs.refs[uri]
	if ref == nil {
		return nil
	}
	delete(ref.owners, owner)
	if len(ref.owners) > 0 {
		return nil
	}
	delete(rs.refs, uri)
	if err := src.Resources().Unsubscribe(ctx, ref.server, uri); err != nil {
		return rpcError(err)
	}
	return nil
}

// releaseAll releases every URI of an owner that went away (a closed
// session, an ended listen stream), in the background: the caller may be
// the event loop or a request's cleanup.
func (rs *resourceSubs) releaseAll(owner any, uris []string) {
	if len(uris) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, uri := range uris {
			if e := rs.release(ctx, owner, uri); e != nil {
				rs.log.Debug().Str("uri", uri).Str("error", e.Message).Msg("unsubscribing upstream")
			}
		}
	}()
}

// UpstreamSubscriptions returns the resource URIs the gateway holds
// subscribed upstream, by server, for tests and status.
func (g *Gateway) UpstreamSubscriptions() map[string][]string {
	rs := g.subs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := map[string][]string{}
	for uri, ref := range rs.refs {
		out[ref.server] = append(out[ref.server], uri)
	}
	return out
}

// call is a downstream tools/call, prompts/get or resources/read in
// flight on a server: a server's request to its client goes first to the
// client whose call it serves, on that call's own stream (w.Ask), or,
// for a stateless-era client, as input_required (input).
type call struct {
	w      mcpserver.ResponseWriter // the downstream request's
	s      *mcpserver.Session
	server string
	input  *inputCall // a stateless-era client's call (nil: a handshake-era one)
	seq    uint64
	who    context.Context // the downstream request's: its caller (access rules)
}

// callKey is the context key of the downstream call a request to a
// server serves.
type callKey struct{}

func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// answers reports whether c's client can answer method.
func (c *call) answers(method string, wantURL bool) bool {
	if c.input != nil {
		return declares(c.input.caps, method, wantURL)
	}
	return canAnswer(c.s, method, wantURL)
}

// callTable holds the downstream calls in flight, for the servers'
// requests to find the client whose call they serve.
//
// Concurrency: safe for concurrent use; mu guards every field.
type callTable struct {
	mu    sync.Mutex
	calls map[*call]struct{} // tools/call, prompts/get, resources/read in flight; guarded by mu
	seq   uint64             // numbers calls, newest highest; guarded by mu
}

// started records that c is in flight.
func (t *callTable) started(c *call) {
	t.mu.Lock()
	t.seq++
	c.seq = t.seq
	if t.calls == nil {
		t.calls = map[*call]struct{}{}
	}
	t.calls[c] = struct{}{}
	t.mu.Unlock()
}

// ended forgets c.
func (t *callTable) ended(c *call) {
	t.mu.Lock()
	delete(t.calls, c)
	t.mu.Unlock()
}

// Forwarder answers the servers' requests to their client
// (sampling/createMessage, elicitation/create, roots/list) by asking a
// downstream client of the gateway attached with Attach. It exists before
// the gateway does, because the Supervisor's Options need it at Start:
// Configure it into the Options, start the Supervisor, create the gateway
// over it, then Attach. Until then, and when no downstream client can
// answer, the server gets a JSON-RPC error saying so.
type Forwarder struct {
	g atomic.Pointer[Gateway]
}

// Configure declares the sampling, elicitation (form and URL) and roots
// capabilities to every server, routes their requests to f, and has the
// calls that need approval put to the calling client (ApproveCall). The
// gateway learns the roots from a downstream client when a server asks;
// it does not pass on downstream roots/list_changed (the servers ask again
// when they need to).
func (f *Forwarder) Configure(o *mcpvisor.Options) {
	o.Capabilities = ClientCapabilities()
	o.Requests = f.Handle
	o.Inputs = f.Inputs
	o.ApproveCall = f.ApproveCall
}

// ClientCapabilities are the client capabilities the gateway presents to
// every server: sampling, elicitation (form and URL) and roots. Every
// command that connects to servers presents these same ones, so that a
// server offers each of them the same tools and its pins agree.
func ClientCapabilities() protocol.ClientCapabilities {
	empty := json.RawMessage(`{}`)
	elicit := json.RawMessage(`{"form":{},"url":{}}`)
	return protocol.ClientCapabilities{Sampling: &empty, Elicitation: &elicit, Roots: &protocol.RootsCapability{}}
}

// Attach makes g the gateway whose clients answer.
func (f *Forwarder) Attach(g *Gateway) { f.g.Store(g) }

// Handle answers one server request (an Options.Requests function).
func (f *Forwarder) Handle(ctx context.Context, server, method string, params json.RawMessage) (any, error) {
	g := f.g.Load()
	if g == nil {
		return nil, protocol.NewError(protocol.CodeMethodNotFound, "mcpvisor gateway: no downstream client is connected to answer %s", method)
	}
	return g.ClientRequest(ctx, server, method, params)
}

// ClientRequest asks a downstream client to answer a server's request
// method (sampling/createMessage, elicitation/create, roots/list), and
// returns its result (raw) or its JSON-RPC error. The client is the one
// whose tools/call is in flight on server, if it declared the capability
// the method needs, else the one most recently active that declared it;
// stateless (2026-07-28) clients are never asked. With no such client, or
// when ctx ends, the error is a *protocol.Error for the server.
func (g *Gateway) ClientRequest(ctx context.Context, server, method string, params json.RawMessage) (any, error) {
	var wantURL bool
	if method == protocol.MethodElicitationCreate {
		var p struct {
			Mode string `json:"mode"`
		}
		_ = json.Unmarshal(params, &p)
		wantURL = p.Mode == "url"
	}
	c := callOf(ctx)
	if c == nil || c.server != server || !c.answers(method, wantURL) {
		c = g.calls.pick(server, method, wantURL)
	}
	if c != nil && c.input != nil {
		g.metrics.clientRequests.Add(1)
		key := fmt.Sprintf("%s-%d", method, g.reqSeq.Add(1))
		return c.input.ask(ctx, key, method, params)
	}
	var ask func(ctx context.Context) (json.RawMessage, error)
	var p any
	if len(params) > 0 {
		p = params
	}
	switch {
	case c != nil:
		ask = func(ctx context.Context) (json.RawMessage, error) { return c.w.Ask(ctx, method, p) }
	default:
		s := g.pickSession(server, method, wantURL)
		if s == nil {
			g.metrics.clientRefused.Add(1)
			return nil, protocol.NewError(protocol.CodeMethodNotFound,
				"mcpvisor gateway: no downstream client that declared the capability for %s is connected", method)
		}
		ask = func(ctx context.Context) (json.RawMessage, error) { return s.Ask(ctx, method, p) }
	}
	g.metrics.clientRequests.Add(1)
	g.log.Debug().Str("server", server).Str("method", method).Msg("server request forwarded downstream")
	res, err := ask(ctx)
	var pe *protocol.Error
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &pe):
		return nil, pe
	case errors.Is(err, mcpserver.ErrSessionClosed), errors.Is(err, mcpserver.ErrUnreachable):
		return nil, protocol.NewError(protocol.CodeInternalError, "mcpvisor gateway: the downstream client went away before answering %s", method)
	}
	return nil, protocol.NewError(protocol.CodeInternalError, "mcpvisor gateway: no answer from the downstream client to %s: %v", method, context.Cause(ctx))
}

// callersOn returns the contexts of the calls in flight on server (their
// callers).
func (t *callTable) callersOn(server string) []context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []context.Context
	for c := range t.calls {
		if c.server == server && c.who != nil {
			out = append(out, c.who)
		}
	}
	return out
}

// pick chooses the call in flight on server whose client can answer
// method: the newest.
func (t *callTable) pick(server, method string, wantURL bool) *call {
	t.mu.Lock()
	defer t.mu.Unlock()
	var best *call
	for c := range t.calls {
		if c.server == server && (best == nil || c.seq > best.seq) && c.answers(method, wantURL) {
			best = c
		}
	}
	return best
}

// pickSession chooses, when no call of a client that can answer is in
// flight on the server, the handshake-era session that answers: the most
// recently active one that declared the capability, can be reached, and
// whose caller the access rules let use the server; under access rules
// only a session of a caller whose call is in flight on the server, when
// one is (a server's request names no call: it is taken to be one of
// theirs, never another caller's).
func (g *Gateway) pickSession(server, method string, wantURL bool) *mcpserver.Session {
	var pick *mcpserver.Session
	var last time.Time
	mayUse := g.view.audience(server)
	var callers []context.Context // under access rules, those whose calls are in flight on server
	if mayUse != nil {
		callers = g.calls.callersOn(server)
	}
	for _, s := range g.srv.Sessions() {
		if !canAnswer(s, method, wantURL) || !s.Reachable() || mayUse != nil && !mayUse(s, nil) ||
			len(callers) > 0 && !slices.ContainsFunc(callers, func(c context.Context) bool { return sameCaller(g.view.callers.of(s), c) }) {
			continue
		}
		if used := s.LastActive(); pick == nil || used.After(last) {
			pick, last = s, used
		}
	}
	return pick
}

// canAnswer reports whether s is a handshake-era session that declared
// the capability method needs.
func canAnswer(s *mcpserver.Session, method string, wantURL bool) bool {
	if s.Closed() || !s.Client().Initialized {
		return false
	}
	return declares(s.Client().Capabilities, method, wantURL)
}

// complete serves completion/complete: a prompt's argument (the prompt by
// its downstream name) or a resource template's (by its URI template) is
// completed by the server that offers it, once check (the access rules:
// accessView.refuseServer) lets the caller use that server.
func (pl *pool) complete(ctx context.Context, params json.RawMessage, check func(ctx context.Context, what, server string) *protocol.Error) (any, *protocol.Error) {
	src, ok := pl.b.(ServerSource)
	if !ok {
		return nil, errorf(protocol.CodeMethodNotFound, "method not found: %s", protocol.MethodCompletionComplete)
	}
	var p protocol.CompleteParams
	if err := json.Unmarshal(params, &p); err != nil || p.Ref.Type == "" {
		return nil, errorf(protocol.CodeInvalidParams, "completion/complete: want {ref, argument}")
	}
	var server string
	switch p.Ref.Type {
	case protocol.RefPrompt:
		name := p.Ref.Name
		if q, ok := pl.naming.current().promptIn[name]; ok {
			name = q
		}
		prompts := listPrompts(pl.b)
		for _, pr := range prompts {
			if pr.Name == name {
				server, p.Ref.Name = pr.Server, pr.Prompt.Name
				break
			}
		}
	case protocol.RefResource:
		_, ts := listResources(pl.b)
		for _, t := range ts {
			if t.Template.URITemplate == p.Ref.URI {
				server = t.Server
				break
			}
		}
		if server == "" {
			server = pl.serverOfResource(p.Ref.URI)
		}
	}
	if server == "" {
		return nil, errorf(protocol.CodeInvalidParams, "completion/complete: no server offers %s %q", p.Ref.Type, p.Ref.Name+p.Ref.URI)
	}
	if perr := check(ctx, "completion of "+p.Ref.Type+" "+strconv.Quote(p.Ref.Name+p.Ref.URI), server); perr != nil {
		return nil, perr
	}
	res, err := src.Server(server).Complete(ctx, p.Ref, p.Argument, p.Context)
	if err != nil {
		return nil, rpcError(err)
	}
	return res, nil
}
