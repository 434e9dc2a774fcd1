package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// handle finds a configured server.
func (s *published) handle(name string) (*serverHandle, error) {
	for _, h := range *s.handles.Load() {
		if h.name == name {
			return h, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownServer, name)
}

// ready returns the server's live view, or why there is none.
func ready(h *serverHandle) (*serverView, error) {
	v := h.view.Load()
	if v.state != StateReady || v.sess == nil {
		return nil, &NotReadyError{Server: h.name, State: v.state, Cause: v.err}
	}
	return v, nil
}

// onSession runs one request on the server's live session, with the
// server's default deadline when ctx has none. A server that is not ready
// is waited for (see awaitReady). The outcome feeds the connection's
// strike count. A request the server refused unread because it forgot the
// session is sent once more on the new session; a request whose
// connection ended fails with a *ConnectionLostError.
func onSession[T any](ctx context.Context, s *Supervisor, h *serverHandle, request func(context.Context, *session.Session) (T, error)) (T, error) {
	var zero T
	if s.pool.Load().off.Has(h.name) {
		return zero, fmt.Errorf("%w: %q", ErrServerOff, h.name)
	}
	ctx, cancel := withDefaultTimeout(ctx, s.opts.callTimeout(h))
	defer cancel()
	v := h.view.Load()
	if p, ok := forPrincipal(ctx, &v.cfg, &s.opts); ok {
		return onUserSession(ctx, s, h, p, request) // usersessions.go
	}
	if v.state != StateReady || v.sess == nil || v.sess.Err() != nil {
		var err error
		if v, err = s.awaitReady(ctx, h, nil); err != nil {
			return zero, err
		}
	}
	start := time.Now()
	res, err := request(ctx, v.sess)
	h.recordOutcome(s.system.Root, v, err)
	if err != nil && errors.Is(err, transports.ErrSessionExpired) {
		// The server forgot the session and refused the request unread:
		// the server actor is initializing a new session. Wait for it and
		// send the request once more.
		nv, werr := s.awaitReady(ctx, h, v.sess)
		if werr != nil {
			return res, hostErr(fmt.Errorf("%w (and no new session: %w)", err, werr))
		}
		res, err = request(ctx, nv.sess)
		h.recordOutcome(s.system.Root, nv, err)
		v = nv
	}
	h.latency.observe(time.Since(start), err != nil)
	switch {
	case err == nil:
	case errors.Is(err, session.ErrConnectionClosed), errors.Is(err, session.ErrServerRestarting):
		return res, &ConnectionLostError{Server: h.name, Attempt: v.attempt + 1, Err: err}
	case brokeMidRequest(err):
		// Over HTTP each request has its own connection, and the
		// session outlives it: the call is lost all the same.
		return res, &ConnectionLostError{Server: h.name, Attempt: v.attempt + 1, Err: fmt.Errorf("%w: %w", session.ErrConnectionClosed, err)}
	}
	return res, hostErr(err)
}

// brokeMidRequest reports whether a request failed because the
// connection carrying it broke after it was sent (reset, EOF, a stream
// cut off) rather than being refused or answered with an error.
func brokeMidRequest(err error) bool {
	switch transports.Classify(err) {
	case transports.ClassReset, transports.ClassClosed:
		return true
	}
	return false
}

// callTimeout is the default deadline of a request to the server: its
// timeoutMs, else Options.RequestTimeout.
func (o *runOptions) callTimeout(h *serverHandle) time.Duration {
	if ms := h.view.Load().cfg.TimeoutMs; ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return o.RequestTimeout
}

// toolCallTimeout is the default deadline of a tool call to the server:
// its timeoutMs, else Options.CallTimeout.
func (o *runOptions) toolCallTimeout(h *serverHandle) time.Duration {
	if ms := h.view.Load().cfg.TimeoutMs; ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return o.CallTimeout
}

// recordOutcome counts a request's outcome on connection v: a transient
// transport error is a strike, an answer clears the strikes.
func (h *serverHandle) recordOutcome(root *actor.RootContext, v *serverView, err error) {
	strike, ok := strikes(err)
	if !ok || h.view.Load().sess != v.sess {
		return // says nothing, or about a connection already replaced
	}
	if strike {
		h.strike(root, v.gen, v.strikeLimit, err)
	} else if h.strikes.Load() != 0 {
		h.strikes.Store(0)
	}
}

// awaitReady returns the server's view once it is ready with a session
// other than old. A server connecting or reconnecting is waited for, up to
// ctx's end (unless Options.FailFast; a session being renewed after
// expiry is always waited for). A server parked when the wait begins is
// woken, and the call waits for that one fresh attempt; one that parks
// while the call waits has just failed its attempts, and the call fails
// with it. Disabled, stopped and held servers fail at once.
func (s *Supervisor) awaitReady(ctx context.Context, h *serverHandle, old *session.Session) (*serverView, error) {
	woken, wokenAt := false, uint64(0)
	for first := true; ; first = false {
		changed := h.changed.next()
		v := h.view.Load()
		switch {
		case v.state == StateReady && v.sess != nil && v.sess != old:
			if v.sess.Err() == nil {
				return v, nil
			}
			// The session has ended and the actor is about to say so:
			// wait for what comes next rather than fail a call never sent.
		case v.state == StateDisabled || v.state == StateStopped || v.state == StateNeedsApproval:
			return nil, &NotReadyError{Server: h.name, State: v.state, Cause: v.err}
		case v.state.Parked():
			if woken && v.gen > wokenAt || !first && !woken {
				// The fresh attempt failed, or the server parked while
				// the call waited for it.
				return nil, &NotReadyError{Server: h.name, State: v.state, Cause: v.err}
			}
			if s.opts.FailFast {
				return nil, &NotReadyError{Server: h.name, State: v.state, Cause: v.err}
			}
			if !woken {
				woken, wokenAt = true, v.gen
				s.system.Root.Send(s.registry, wakeServer{name: h.name, handle: h})
			}
		case s.opts.FailFast && !v.renewing():
			return nil, &NotReadyError{Server: h.name, State: v.state, Cause: v.err}
		case v.state == StatePending && v.cfg.Lazy && !woken:
			// A lazy server connects on first use.
			woken, wokenAt = true, v.gen
			s.system.Root.Send(s.registry, wakeServer{name: h.name, handle: h})
		}
		select {
		case <-changed:
		case <-ctx.Done():
			v := h.view.Load()
			return nil, &NotReadyError{Server: h.name, State: v.state, Cause: v.err, Waited: context.Cause(ctx)}
		}
	}
}

// callTool is CallTool with the request's options.
func (s *Supervisor) callTool(ctx context.Context, name string, args json.RawMessage, o RequestOptions) (res *protocol.CallToolResult, err error) {
	defer func() {
		if err == nil && res != nil && !res.IsError {
			s.search.called(name) // learning from searches (search.go)
		}
	}()
	p := s.pool.Load()
	if b, ok := p.builtinByName[name]; ok {
		if b.Call == nil {
			return nil, fmt.Errorf("%w: %q", ErrHostTool, name)
		}
		ctx, cancel := withDefaultTimeout(ctx, s.opts.CallTimeout)
		defer cancel()
		return b.Call(ctx, args)
	}
	e, err := s.route(ctx, name, func(p *pool) (poolEntry, bool) {
		if e, ok := p.toolsByName.Get(name); ok {
			return e, true
		}
		// A parked server's tools are out of the pool, but a call by name
		// wakes the server.
		e, ok := p.hiddenTools.Get(name)
		return e, ok
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %q", err, name)
	}
	if err := s.permissions.permit(ctx, name, e.h, e.name, args); err != nil {
		return nil, err
	}
	call := func(ctx context.Context, sess *session.Session) (*protocol.CallToolResult, error) {
		return sess.CallToolWith(ctx, e.name, args, o.session())
	}
	// A tool call's own default deadline (one for the call and its
	// replay); onSession's does not apply then.
	ctx, cancel := withDefaultTimeout(ctx, s.opts.toolCallTimeout(e.h))
	defer cancel()
	if !s.opts.ReplayIdempotent || !e.replayable {
		return onSession(ctx, s, e.h, call)
	}
	res, err = onSession(ctx, s, e.h, call)
	var lost *ConnectionLostError
	if errors.As(err, &lost) {
		s.log.Info().Str("server", e.h.name).Str("tool", e.name).Msg("replaying a read-only, idempotent call after its connection was lost")
		return onSession(ctx, s, e.h, call)
	}
	return res, err
}

// route finds the pool entry of a qualified name with find. It is the
// one place where the library's calls (CallTool, Server(name).CallTool,
// Prompts().Get) and the gateway's find the server behind a name, and so the
// one place that waits for a server whose names are not known yet.
//
// A name no entry has may belong, by its mcp__<server>__ prefix, to:
//   - a lazy server not yet connected (its tools are unknown until then):
//     the call wakes it;
//   - a server that has just become ready: its status says so a moment
//     before the registry folds its lists into the pool (rebuilds are
//     spaced);
//   - a server that has not listed yet: still pending or connecting (a
//     host that calls as soon as it starts), reconnecting after a failed
//     first connect, or parked before it ever listed (the call wakes it
//     for one fresh attempt, as a call to a parked server's tool does).
//
// Then the call waits for that server to be ready (awaitReady, within
// ctx or the server's call deadline) and looks the name up again once the
// pool has its lists; a server that does not get ready in time fails the
// call with its *NotReadyError (state and last error), never
// ErrUnknownTool. ErrUnknownTool is kept for names no configured server
// could offer: no server has the prefix, or the server is ready and
// pooled without such a name.
func (s *Supervisor) route(ctx context.Context, name string, find func(*pool) (poolEntry, bool)) (poolEntry, error) {
	p := s.pool.Load()
	if e, ok := find(p); ok {
		return e, nil
	}
	if server, ok := p.offRoutes.Get(name); ok {
		return poolEntry{}, fmt.Errorf("%w (server %q)", ErrServerOff, server)
	}
	h := s.lazyServerOf(name)
	if h == nil {
		h = s.unfoldedServerOf(name)
	}
	if h == nil {
		h = s.unlistedServerOf(name)
		if h != nil && p.off.Has(h.name) {
			return poolEntry{}, fmt.Errorf("%w (server %q)", ErrServerOff, h.name)
		}
	}
	if h == nil {
		// The pool may have folded the server's lists in since it was
		// loaded above (then its view no longer counts as unfolded):
		// look again in the pool as it is now.
		if e, ok := find(s.pool.Load()); ok {
			return e, nil
		}
		return poolEntry{}, ErrUnknownTool
	}
	ctx, cancel := withDefaultTimeout(ctx, s.opts.callTimeout(h))
	defer cancel()
	byPrincipal := false
	if v := h.view.Load(); v.state == StateNeedsAuth {
		if pr, ok := forPrincipal(ctx, &v.cfg, &s.opts); ok {
			// A per-user server whose own connection needs authorization:
			// the principal's session lists its tools (usersessions.go),
			// or says what the principal must authorize.
			if _, err := s.userSession(ctx, h, pr); err != nil {
				return poolEntry{}, err
			}
			byPrincipal = true
		}
	}
	if !byPrincipal {
		if _, err := s.awaitReady(ctx, h, nil); err != nil {
			return poolEntry{}, err
		}
	}
	// The registry folds the new lists into the pool just after the
	// server's ready view: wait for it.
	for {
		changed := s.poolChanged.next()
		// One pool for both questions: read twice, the pool might fold
		// the server in between, and a pool that has the tool would be
		// taken for one that reflects the server without it.
		p := s.pool.Load()
		if e, ok := find(p); ok {
			return e, nil
		}
		if v := h.view.Load(); (v.state == StateReady || byPrincipal && v.offersTools()) && p.viewOf(h).view == v {
			return poolEntry{}, ErrUnknownTool // ready, and has no such tool
		}
		select {
		case <-changed:
		case <-s.closed:
			return poolEntry{}, ErrClosed
		case <-ctx.Done():
			return poolEntry{}, ErrUnknownTool
		}
	}
}

// lazyServerOf returns the lazy, never-connected server whose qualified
// names start like name (the longest such prefix), or nil.
func (s *published) lazyServerOf(name string) *serverHandle {
	var best *serverHandle
	bestLen := 0
	for _, h := range *s.handles.Load() {
		v := h.view.Load()
		if !v.cfg.Lazy || v.state != StatePending || v.connectedSince != (time.Time{}) {
			continue
		}
		prefix := "mcp__" + sanitize(h.name) + "__"
		if strings.HasPrefix(name, prefix) && len(prefix) > bestLen {
			best, bestLen = h, len(prefix)
		}
	}
	return best
}

// unfoldedServerOf returns the ready server whose qualified names start
// like name (the longest such prefix) when the pool does not reflect its
// view yet, or nil.
func (s *published) unfoldedServerOf(name string) *serverHandle {
	var best *serverHandle
	bestLen := 0
	for _, h := range *s.handles.Load() {
		prefix := "mcp__" + sanitize(h.name) + "__"
		if !strings.HasPrefix(name, prefix) || len(prefix) <= bestLen {
			continue
		}
		if h.view.Load().state == StateReady && !s.poolHas(h) {
			best, bestLen = h, len(prefix)
		}
	}
	return best
}

// unlistedServerOf returns the configured server whose qualified names
// start like name (the longest such prefix) when none of its names are in
// the pool because it has not listed them: it is not ready, and offers
// no tools (neither recovered nor cached) and routes no hidden ones. nil
// when the server with the longest such prefix has its names in the
// pool, or no server has the prefix.
func (s *published) unlistedServerOf(name string) *serverHandle {
	var best *serverHandle
	bestLen := 0
	for _, h := range *s.handles.Load() {
		prefix := "mcp__" + sanitize(h.name) + "__"
		if strings.HasPrefix(name, prefix) && len(prefix) > bestLen {
			best, bestLen = h, len(prefix)
		}
	}
	if best == nil {
		return nil
	}
	if v := best.view.Load(); v.state == StateReady || v.offersTools() || v.routesHiddenTools() {
		return nil
	}
	return best
}

// poolHas reports whether the pool reflects server h's current view.
func (s *published) poolHas(h *serverHandle) bool {
	return s.pool.Load().viewOf(h).view == h.view.Load()
}

// Session returns a ready server's live session, for requests the API
// does not wrap. It is valid until the connection ends.
func (s *published) liveSession(server string) (*session.Session, error) {
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	v, err := ready(h)
	if err != nil {
		return nil, err
	}
	return v.sess, nil
}
