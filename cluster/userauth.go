package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/cluster/internal/wire"
	"github.com/mcpvisor/mcpvisor/internal/routine"
)

// Per-user upstream credentials in a cluster. A request's principal
// (mcpvisor.WithPrincipal, put there by the gateway's resource server)
// crosses to the member that runs the server with the call (CallTool's
// principal: id, name and current access token), and that member calls
// its supervisor with it, so a server with "credentials": "per-user" or
// "exchange" is reached with the caller's own credentials wherever it
// runs. A principal that must authorize such a server first gets the
// owner's *mcpvisor.AuthorizationRequiredError, typed, on the member it
// called: the pending authorization lives in the owner's supervisor,
// and its URL is the owner's OAuthOptions.UserConfirmURL. Member
// implements the gateway's UserAuthorizer by asking every member for a
// flow (PendingAuthorization) or a redirect's state
// (CompleteAuthorization) its own supervisor does not hold, so the
// authorization pages of any member complete a flow another member
// started (members behind one load balancer share one public URL).

// authorizationsActorName names each member's actor that answers for the
// pending authorizations of its supervisor:
// actor.NewPID(<its address>, authorizationsActorName).
const authorizationsActorName = "mcpvisor-authorizations"

// findTimeout bounds the other members' answers to PendingAuthorization
// (it has no context: the gateway's page handler calls it).
const findTimeout = 2 * time.Second

// completeTimeout bounds a CompleteAuthorization whose context has no
// deadline: the code exchange on the flow's member.
const completeTimeout = time.Minute

// Limits of what a member asks the others for: longer input belongs to
// no pending authorization (flows and states are 22 characters).
const (
	maxFlowLength  = 256
	maxQueryLength = 16 << 10
)

// ErrAuthorizationFailed: the member that holds a pending authorization
// could not complete it (the authorization server refused the code, or
// sent error=…); it wraps that member's reason.
var ErrAuthorizationFailed = errors.New("mcpvisor cluster: the authorization did not complete")

// principalOf is the principal ctx carries, for the wire (nil for none).
// The access token is read now, as the call leaves.
func principalOf(ctx context.Context) *wire.Principal {
	p, ok := mcpvisor.PrincipalFrom(ctx)
	if !ok {
		return nil
	}
	wp := &wire.Principal{Id: p.ID, Name: p.Name}
	if p.AccessToken != nil {
		wp.AccessToken = p.AccessToken()
	}
	return wp
}

// withWirePrincipal returns ctx carrying the principal p (from the wire),
// or ctx for none.
func withWirePrincipal(ctx context.Context, p *wire.Principal) context.Context {
	if p.GetId() == "" {
		return ctx
	}
	pr := mcpvisor.Principal{ID: p.GetId(), Name: p.GetName()}
	if token := p.GetAccessToken(); token != "" {
		pr.AccessToken = func() string { return token }
	}
	return mcpvisor.WithPrincipal(ctx, pr)
}

// perPrincipal reports whether server's credentials are per principal
// ("per-user" or "exchange").
func (m *engine) perPrincipal(server string) bool {
	cfg, ok := m.config(server)
	if !ok {
		return false
	}
	return principalCredentials(cfg)
}

func principalCredentials(cfg mcpvisor.ServerConfig) bool {
	s, err := cfg.OAuthSettings()
	return err == nil && s != nil && s.Credentials != "" && s.Credentials != mcpvisor.CredentialsShared
}

// principalTarget finds, for a call with a principal, the server with
// per-principal credentials whose qualified names start like name (the
// longest such prefix): such a server's tools are in the pool only once
// a principal's session listed them, and the owner's supervisor finds
// the tool through the principal's session.
func (m *Member) principalTarget(ctx context.Context, name string) (toolTarget, bool) {
	if _, ok := mcpvisor.PrincipalFrom(ctx); !ok {
		return toolTarget{}, false
	}
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	var best toolTarget
	bestLen := 0
	for server, cfg := range m.configured {
		if !principalCredentials(cfg) {
			continue
		}
		prefix := mcpvisor.QualifiedName(server, "")
		if !strings.HasSuffix(prefix, "__") || len(prefix) <= bestLen || !strings.HasPrefix(name, prefix) || len(name) == len(prefix) {
			continue // a shortened prefix (a server name near the limit) is not matched
		}
		best, bestLen = toolTarget{server: server, tool: name[len(prefix):]}, len(prefix)
	}
	return best, bestLen > 0
}

// authorizationsActor answers the other members' questions about the
// pending authorizations of this member's supervisor. Finding one reads
// a map; completing one (a code exchange) runs on a goroutine of its own
// that answers the asker directly, so the mailbox never waits on I/O.
type authorizationsActor struct{ m *engine }

func (a *authorizationsActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *wire.FindAuthorization:
		req, ok := a.m.local.PendingAuthorization(msg.GetFlow())
		if !ok {
			ctx.Respond(&wire.AuthorizationFound{})
			return
		}
		ctx.Respond(&wire.AuthorizationFound{Found: true, Authorization: &wire.Authorization{
			Server: req.Server, Principal: req.Principal, PrincipalName: req.PrincipalName,
			Flow: msg.GetFlow(), Url: req.URL, ExpiresUnixMs: req.Expires.UnixMilli(),
		}})
	case *wire.CompleteAuthorization:
		sender := ctx.Sender()
		if sender == nil {
			return
		}
		root, m := a.m.sys.Root, a.m
		routine.Go("cluster.authorization", func() { root.Send(sender, m.completeLocal(msg)) })
	}
}

// completeLocal completes the pending authorization of msg's redirect
// if this member's supervisor holds it.
func (m *engine) completeLocal(msg *wire.CompleteAuthorization) *wire.AuthorizationCompleted {
	out := &wire.AuthorizationCompleted{Member: m.id}
	redirect, err := url.ParseQuery(msg.GetQuery())
	if err != nil {
		return out
	}
	timeout := time.Duration(msg.GetTimeoutMs()) * time.Millisecond
	if timeout <= 0 || timeout > completeTimeout {
		timeout = completeTimeout
	}
	ctx, cancel := context.WithTimeout(m.stopCtx, timeout)
	defer cancel()
	server, err := m.local.CompleteAuthorization(ctx, redirect)
	if errors.Is(err, mcpvisor.ErrUnknownAuthorization) {
		return out
	}
	out.Known, out.Server = true, server
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

// askOthers sends msg to the authorizations actor of every other member
// of the latest topology, in parallel, each answer awaited at most
// timeout, and returns the first answer accept takes (nil when none
// did).
func (m *engine) askOthers(msg any, timeout time.Duration, accept func(any) bool) any {
	t := m.reconcile.latest()
	if t == nil || m.left.Load() {
		return nil
	}
	var addrs []string
	for _, member := range t.Members {
		if addr := member.Address(); addr != m.sys.Address() {
			addrs = append(addrs, addr)
		}
	}
	answers := make(chan any, len(addrs))
	for _, addr := range addrs {
		routine.Go("cluster.authorization.ask", func() {
			reply, err := m.sys.Root.RequestFuture(actor.NewPID(addr, authorizationsActorName), msg, timeout).Result()
			if err != nil {
				reply = nil
			}
			answers <- reply
		})
	}
	for range addrs {
		if reply := <-answers; reply != nil && accept(reply) {
			return reply
		}
	}
	return nil
}

// PendingAuthorization returns the pending authorization flow names (an
// *mcpvisor.AuthorizationRequiredError's Flow), held by this member's
// supervisor or by another member's (asked for at most 2 s), if it is
// still pending. With UserAuthorizer's CompleteAuthorization it lets the
// gateway's authorization pages of any member serve a flow that another
// member, the one that runs the server, started.
func (m *Member) PendingAuthorization(flow string) (mcpvisor.AuthorizationRequest, bool) {
	if flow == "" || len(flow) > maxFlowLength {
		return mcpvisor.AuthorizationRequest{}, false
	}
	if req, ok := m.e.local.PendingAuthorization(flow); ok {
		return req, true
	}
	reply := m.e.askOthers(&wire.FindAuthorization{Flow: flow}, findTimeout, func(r any) bool {
		f, ok := r.(*wire.AuthorizationFound)
		return ok && f.GetFound() && f.GetAuthorization() != nil
	})
	if reply == nil {
		return mcpvisor.AuthorizationRequest{}, false
	}
	a := reply.(*wire.AuthorizationFound).GetAuthorization()
	return mcpvisor.AuthorizationRequest{Server: a.GetServer(), Principal: a.GetPrincipal(), PrincipalName: a.GetPrincipalName(),
		URL: a.GetUrl(), Expires: time.UnixMilli(a.GetExpiresUnixMs())}, true
}

// CompleteAuthorization completes the pending authorization a browser's
// redirect (the callback's query: code and state) belongs to, on the
// member whose supervisor holds it: this member's, else whichever other
// member knows the state (all are asked, within ctx's deadline, else a
// minute). It returns the server's name and the authorization's outcome
// as mcpvisor.Supervisor.CompleteAuthorization does; another member's
// failure is ErrAuthorizationFailed with its reason, and a redirect no
// member knows is mcpvisor.ErrUnknownAuthorization.
func (m *Member) CompleteAuthorization(ctx context.Context, redirect url.Values) (server string, err error) {
	server, err = m.e.local.CompleteAuthorization(ctx, redirect)
	if !errors.Is(err, mcpvisor.ErrUnknownAuthorization) {
		return server, err
	}
	query := redirect.Encode()
	if redirect.Get("state") == "" || len(query) > maxQueryLength {
		return "", err
	}
	timeout := completeTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	if timeout <= 0 {
		return "", ctx.Err()
	}
	msg := &wire.CompleteAuthorization{Query: query, TimeoutMs: timeout.Milliseconds()}
	type result struct{ reply any }
	done := make(chan result, 1)
	routine.Go("cluster.authorization.complete", func() {
		done <- result{m.e.askOthers(msg, timeout, func(r any) bool {
			c, ok := r.(*wire.AuthorizationCompleted)
			return ok && c.GetKnown()
		})}
	})
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if res.reply == nil {
		return "", mcpvisor.ErrUnknownAuthorization
	}
	c := res.reply.(*wire.AuthorizationCompleted)
	if c.GetError() != "" {
		return c.GetServer(), fmt.Errorf("%w on member %s: %s", ErrAuthorizationFailed, c.GetMember(), c.GetError())
	}
	return c.GetServer(), nil
}
