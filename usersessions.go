package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/internal/routine"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/httpclient"
)

// Per-principal sessions. A server whose credentials are per user
// ("credentials": "per-user" or "exchange") keeps its one connection,
// owned by its server actor, for what is not made for anyone in
// particular: listing its tools, resources and prompts for the pool, and
// the requests that carry no principal. A request that carries a
// principal (WithPrincipal) goes through that principal's own session,
// opened on first use with a token source of the principal's own, whose
// tokens OAuthOptions.Store keeps under the principal's ID: one
// principal's token never travels on another's session, and the server
// binds each session to the one user it authorized.
//
// A per-user principal without tokens gets an AuthorizationRequiredError
// naming a pending authorization (userFlows): the principal authorizes
// in a browser and comes back to OAuthOptions.UserRedirectURL. An
// "exchange" principal needs no browser: its access token is exchanged
// for one the server accepts (RFC 8693).
//
// The sessions carry requests only: their notifications, but for
// progress, are dropped (the pool follows the server's one connection).
// A session unused for OAuthOptions.UserSessionIdle is closed, and so is
// the least recently used beyond OAuthOptions.MaxUserSessions. The
// server actor closes them all when it stops, restarts or its config
// changes (closeAll).

// userSessions are one server's principal sessions.
//
// Concurrency: mu guards every field. The goroutines of requests open
// sessions (one connect per principal at a time: later requests wait for
// it) and use them; a session's end (userHandler.Closed) and the idle
// sweep (a timer's goroutine) drop them; the server actor closes them all
// (closeAll).
type userSessions struct {
	mu    sync.Mutex
	conns map[string]*userConn  // by Principal.ID
	creds map[string]*userCreds // by Principal.ID; outlive sessions
	sweep *time.Timer           // the idle sweep, while conns is not empty
	// stopped is set when the server actor stops for good: no session
	// opens after, so none outlives the actor (and Close).
	stopped bool
}

// userConn is one principal's session, or its connect in flight.
type userConn struct {
	principal string
	// ready is closed when the connect has ended; sess and err are set
	// before, and never change after.
	ready  chan struct{}
	sess   *session.Session
	err    error
	cancel context.CancelFunc // ends the connect (closeAll, eviction)
	used   atomic.Int64       // unix nanoseconds of the last request
	// inBackground runs f as a goroutine of the server actor (its
	// session's shutdown ladder), so that the actor, and Close, wait for
	// it.
	inBackground func(name string, f func())
}

// userCreds are one principal's credentials for the server: its token
// source (built for one config: key), and, for token exchange, the
// principal's latest access token.
type userCreds struct {
	src     *oauth.Source
	key     string
	subject atomic.Pointer[func() string]
}

// defaults of OAuthOptions.
const (
	defaultUserSessionIdle          = 10 * time.Minute
	defaultMaxUserSessions          = 256
	defaultUserAuthorizationTimeout = 10 * time.Minute
)

// forPrincipal reports whether a request of ctx to the server with config
// cfg goes through a principal's session, and whose.
func forPrincipal(ctx context.Context, cfg *ServerConfig, opts *runOptions) (Principal, bool) {
	p, ok := PrincipalFrom(ctx)
	if !ok || cfg.credentials() == CredentialsShared || !authorizes(cfg, opts) {
		return Principal{}, false
	}
	return p, true
}

// onUserSession runs one request on principal p's session with server h
// (onSession's path for such requests): opened when needed, and opened
// again once when the server forgot it.
func onUserSession[T any](ctx context.Context, s *Supervisor, h *serverHandle, p Principal, request func(context.Context, *session.Session) (T, error)) (T, error) {
	var zero T
	uc, err := s.principals.session(ctx, h, p)
	if err != nil {
		return zero, err
	}
	start := time.Now()
	res, err := request(ctx, uc.sess)
	if err != nil && errors.Is(err, transports.ErrSessionExpired) {
		h.users.drop(uc)
		if uc, err = s.principals.session(ctx, h, p); err != nil {
			return zero, err
		}
		res, err = request(ctx, uc.sess)
	}
	uc.used.Store(time.Now().UnixNano())
	h.latency.observe(time.Since(start), err != nil)
	switch {
	case err == nil:
	case errors.Is(err, session.ErrConnectionClosed), errors.Is(err, session.ErrServerRestarting), brokeMidRequest(err):
		h.users.drop(uc)
		return res, &ConnectionLostError{Server: h.name, Attempt: 1, Err: err}
	}
	return res, hostErr(err)
}

// principals opens the principals' own sessions of per-user and
// exchange servers, kept on each server's handle (serverHandle.users),
// and keeps their pending authorizations (flows, userauth.go).
//
// Concurrency: s is set by Start and not written after; flows has its
// own lock; each server's sessions are guarded by its users.mu.
type principals struct {
	s     *Supervisor
	flows userFlows
}

// userSession returns principal p's live session with server h, opening
// it (or waiting for the connect in flight) within ctx.
func (ps *principals) session(ctx context.Context, h *serverHandle, p Principal) (*userConn, error) {
	s := ps.s
	v := h.view.Load()
	cfg := v.cfg
	switch {
	case cfg.held():
		return nil, &NotReadyError{Server: h.name, State: StateNeedsApproval, Cause: heldError(cfg)}
	case v.state == StateDisabled || v.state == StateStopped:
		return nil, &NotReadyError{Server: h.name, State: v.state, Cause: v.err}
	}
	if ps.flows.pending(h.name, p.ID) {
		// The principal's source is busy with that authorization (a
		// connect would wait for it): point at it again.
		return nil, ps.flows.require(ctx, s, h.name, p, nil)
	}
	u := &h.users
	u.mu.Lock()
	if u.stopped {
		u.mu.Unlock()
		return nil, &NotReadyError{Server: h.name, State: StateStopped}
	}
	uc := u.conns[p.ID]
	if uc != nil && uc.ended() {
		delete(u.conns, p.ID) // a session that has ended: open anew
		uc = nil
	}
	if uc == nil {
		creds, err := u.credsFor(s, h, &cfg, p)
		if err != nil {
			u.mu.Unlock()
			return nil, err
		}
		uc = &userConn{principal: p.ID, ready: make(chan struct{}), inBackground: func(name string, f func()) { h.goroutine(s.system.Root, s.opts.dispatch, name, f) }}
		uc.used.Store(time.Now().UnixNano())
		if u.conns == nil {
			u.conns = map[string]*userConn{}
		}
		u.conns[p.ID] = uc
		u.evictLocked(s.opts.OAuth.MaxUserSessions)
		u.scheduleSweepLocked(s.opts.OAuth.UserSessionIdle)
		ps.connect(h, cfg, uc, creds.src)
	} else if p.AccessToken != nil {
		if c := u.creds[p.ID]; c != nil {
			c.subject.Store(&p.AccessToken)
		}
	}
	u.mu.Unlock()
	select {
	case <-uc.ready:
	case <-ctx.Done():
		return nil, &NotReadyError{Server: h.name, State: StateConnecting, Waited: context.Cause(ctx)}
	}
	if uc.err == nil {
		return uc, nil
	}
	if ClassifyFailure(uc.err) == FailureAuth && cfg.credentials() == CredentialsPerUser {
		u.mu.Lock()
		creds := u.creds[p.ID]
		u.mu.Unlock()
		if creds != nil {
			return nil, ps.flows.require(ctx, s, h.name, p, creds.src)
		}
	}
	state := StateFailed
	if ClassifyFailure(uc.err) == FailureAuth {
		state = StateNeedsAuth
	}
	return nil, &NotReadyError{Server: h.name, State: state, Cause: uc.err}
}

// ended reports whether the connect has ended without a live session.
func (uc *userConn) ended() bool {
	select {
	case <-uc.ready:
		return uc.err != nil || uc.sess.Err() != nil
	default:
		return false
	}
}

// credsFor returns principal p's credentials for server h (config cfg),
// building its token source on first use or after a config change. u.mu
// is held.
func (u *userSessions) credsFor(s *Supervisor, h *serverHandle, cfg *ServerConfig, p Principal) (*userCreds, error) {
	key := authKey(cfg)
	if c := u.creds[p.ID]; c != nil && c.key == key {
		if p.AccessToken != nil {
			c.subject.Store(&p.AccessToken)
		}
		return c, nil
	}
	c := &userCreds{key: key}
	if p.AccessToken != nil {
		c.subject.Store(&p.AccessToken)
	}
	o := s.opts.OAuth
	o.Store = principalStore{inner: s.opts.userStore, id: p.ID}
	o.UserAgent = nil // a principal's browser flow goes through userFlows
	var extra func(*oauth.Config)
	if cfg.credentials() == CredentialsExchange {
		if p.AccessToken == nil {
			return nil, fmt.Errorf("server %q: %w", h.name, ErrNoSubjectToken)
		}
		extra = c.exchange
		o.Store = &oauth.MemoryStore{} // exchanged tokens are not kept beyond the principal's credentials
	}
	src, err := newAuthSource(h.name, *cfg, o, serverLogger(s.opts.Logger, h.name), extra)
	if err != nil {
		return nil, &transports.ConfigError{Err: err}
	}
	c.src = src
	if u.creds == nil {
		u.creds = map[string]*userCreds{}
	}
	u.creds[p.ID] = c
	return c, nil
}

// connectUser opens the session of uc in a goroutine the server actor
// counts as its own (it does not stop while one runs).
func (ps *principals) connect(h *serverHandle, cfg ServerConfig, uc *userConn, src *oauth.Source) {
	s := ps.s
	timeout := s.opts.ConnectTimeout
	if ms := cfg.ConnectTimeoutMs; ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	uc.cancel = cancel
	log := serverLogger(s.opts.Logger, h.name)
	opts := &s.opts
	h.goroutine(s.system.Root, s.opts.dispatch, "server.connect-user", func() {
		defer cancel()
		sess, err := openUserSession(ctx, h, cfg, opts, log, src, uc)
		u := &h.users
		u.mu.Lock()
		if err == nil && u.conns[uc.principal] != uc {
			// Closed (closeAll, eviction) while connecting.
			closeSession(sess, session.ErrConnectionClosed)
			sess, err = nil, session.ErrConnectionClosed
		}
		if err != nil && u.conns[uc.principal] == uc {
			delete(u.conns, uc.principal)
		}
		uc.sess, uc.err = sess, err
		u.mu.Unlock()
		close(uc.ready)
		if err == nil {
			h.offerUserLists(ctx, s.system.Root, s.opts.ToolPins.Store, sess)
		}
	})
}

// userListed carries the tools a principal's session listed to the
// server actor of a per-user server that has none: its one connection
// waits for authorization the host may never give (needs-auth), and the
// pool offers these instead (as it offers a lazy server's cached tools),
// so that principals find the tools their own sessions reach.
type userListed struct {
	tools  []protocol.Tool
	pins   *toolPins
	pinErr error
}

// offerUserLists lists the tools on a principal's new session, when the
// server's pool entry has none because its one connection needs
// authorization, and hands them to the server actor. It runs in the
// connect's goroutine.
func (h *serverHandle) offerUserLists(ctx context.Context, root *actor.RootContext, pins PinStore, sess *session.Session) {
	v := h.view.Load()
	if v.state != StateNeedsAuth || len(v.lists.tools) > 0 || h.pid == nil || h.stopped.Load() {
		return
	}
	tools, err := sess.Lists().Tools(ctx)
	if err != nil {
		return // the principal's requests still go through; the pool waits for another
	}
	m := userListed{tools: tools}
	m.pins, m.pinErr = checkPins(pins, h.name, v.cfg, tools)
	root.Send(h.pid, m)
}

// openUserSession dials server h with the principal's token source on
// every request and negotiates.
func openUserSession(ctx context.Context, h *serverHandle, cfg ServerConfig, opts *runOptions, log zerolog.Logger, src *oauth.Source, uc *userConn) (*session.Session, error) {
	client := opts.sharedHTTP
	if cfg.TLS != nil {
		c, err := h.auth.tlsClient(&cfg)
		if err != nil {
			return nil, &transports.ConfigError{Err: err}
		}
		client = c
	}
	wrapped := *client
	wrapped.Transport = &oauth.Transport{Base: client.Transport, Source: src}
	dial, err := dialer(cfg, dialConfigFor(h, opts, log, &wrapped, nil))
	if err != nil {
		return nil, err
	}
	handler := &userHandler{users: &h.users, uc: uc, server: h.name}
	if opts.host != nil {
		handler.progress = opts.host.progress
	}
	sess, err := session.Open(ctx, dial, sessionOptionsFor(h, &cfg, opts, log, handler))
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return sess, nil
}

// goroutine runs f as a goroutine of server h's actor, on dispatch (see
// serverGoroutines.start): the actor does not stop before it ends.
func (h *serverHandle) goroutine(root *actor.RootContext, dispatch *actors.Dispatcher, name string, f func()) {
	h.busy.Add(1)
	h.running.Add(1)
	pid := h.pid
	dispatch.Go(func() {
		routine.Run(name, f, "server", h.name)
		h.running.Done()
		if !h.stopped.Load() && pid != nil {
			root.Send(pid, goroutineDone{})
		} else {
			h.busy.Add(-1)
		}
	})
}

// drop forgets uc if it is still the principal's session, and closes it.
func (u *userSessions) drop(uc *userConn) {
	u.mu.Lock()
	if u.conns[uc.principal] == uc {
		delete(u.conns, uc.principal)
	}
	u.mu.Unlock()
	uc.close(session.ErrConnectionClosed)
}

// close ends uc's connect, or closes its session.
func (uc *userConn) close(cause error) {
	if uc.cancel != nil {
		uc.cancel()
	}
	select {
	case <-uc.ready:
		if sess := uc.sess; sess != nil {
			uc.inBackground("server.close-user-session", func() { closeSession(sess, cause) })
		}
	default:
	}
}

// stop closes every principal's session for good: the server actor is
// stopping.
func (u *userSessions) stop(cause error) {
	u.mu.Lock()
	u.stopped = true
	u.mu.Unlock()
	u.closeAll(cause)
}

// closeAll closes every principal's session (the server stops, restarts
// or changes config); the principals' credentials are kept.
func (u *userSessions) closeAll(cause error) {
	u.mu.Lock()
	conns := u.conns
	u.conns = nil
	if u.sweep != nil {
		u.sweep.Stop()
		u.sweep = nil
	}
	u.mu.Unlock()
	for _, uc := range conns {
		uc.close(cause)
	}
}

// evictLocked closes the least recently used sessions beyond max. u.mu
// is held.
func (u *userSessions) evictLocked(max int) {
	if max <= 0 {
		max = defaultMaxUserSessions
	}
	if len(u.conns) <= max {
		return
	}
	all := make([]*userConn, 0, len(u.conns))
	for _, uc := range u.conns {
		all = append(all, uc)
	}
	slices.SortFunc(all, func(a, b *userConn) int { return int(a.used.Load() - b.used.Load()) })
	for _, uc := range all[:len(all)-max] {
		delete(u.conns, uc.principal)
		uc.close(session.ErrConnectionClosed)
	}
}

// scheduleSweepLocked arms the idle sweep if it is not armed. u.mu is
// held.
func (u *userSessions) scheduleSweepLocked(idle time.Duration) {
	if idle <= 0 {
		idle = defaultUserSessionIdle
	}
	if u.sweep != nil {
		return
	}
	u.sweep = time.AfterFunc(idle/2, func() { u.sweepIdle(idle) })
}

// sweepIdle closes the sessions unused for idle, and arms the next sweep
// while sessions remain.
func (u *userSessions) sweepIdle(idle time.Duration) {
	cutoff := time.Now().Add(-idle).UnixNano()
	var idleConns []*userConn
	u.mu.Lock()
	for id, uc := range u.conns {
		select {
		case <-uc.ready:
		default:
			continue // connecting
		}
		if uc.used.Load() < cutoff {
			delete(u.conns, id)
			idleConns = append(idleConns, uc)
		}
	}
	u.sweep = nil
	if len(u.conns) > 0 {
		u.sweep = time.AfterFunc(idle/2, func() { u.sweepIdle(idle) })
	}
	u.mu.Unlock()
	for _, uc := range idleConns {
		uc.close(session.ErrConnectionClosed)
	}
}

// open reports how many principals' sessions are open or opening, for
// status.
func (u *userSessions) open() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.conns)
}

// userHandler receives what a principal's session sends on its own
// initiative: progress goes to its call; the session's end drops it.
type userHandler struct {
	users    *userSessions
	uc       *userConn
	server   string
	progress *progressRoutes // nil without a host
}

func (h *userHandler) Notification(method string, params json.RawMessage) {
	if method == protocol.NotificationProgress && h.progress != nil {
		h.progress.deliver(h.server, params)
	}
}

func (h *userHandler) Closed(error) {
	h.users.mu.Lock()
	if h.users.conns[h.uc.principal] == h.uc {
		delete(h.users.conns, h.uc.principal)
	}
	h.users.mu.Unlock()
}

// principalStore keeps one principal's credentials in a store shared by
// everyone: its entries are the server URL with the principal's ID
// appended as a fragment, which no server URL has (a canonical resource
// has no fragment), so no principal, nor the host, reads another's.
type principalStore struct {
	inner oauth.Store
	id    string
}

func (ps principalStore) key(serverURL string) string {
	return serverURL + "#principal=" + url.QueryEscape(ps.id)
}

func (ps principalStore) Load(ctx context.Context, serverURL, issuer string) (*oauth.Entry, error) {
	e, err := ps.inner.Load(ctx, ps.key(serverURL), issuer)
	if e == nil || err != nil {
		return nil, err
	}
	c := *e
	c.ServerURL = serverURL
	return &c, nil
}

func (ps principalStore) Save(ctx context.Context, e *oauth.Entry) error {
	c := *e
	c.ServerURL = ps.key(e.ServerURL)
	return ps.inner.Save(ctx, &c)
}

func (ps principalStore) Delete(ctx context.Context, serverURL, issuer string) error {
	return ps.inner.Delete(ctx, ps.key(serverURL), issuer)
}

func (ps principalStore) List(ctx context.Context) ([]*oauth.Entry, error) {
	all, err := ps.inner.List(ctx)
	if err != nil {
		return nil, err
	}
	suffix := ps.key("")
	var mine []*oauth.Entry
	for _, e := range all {
		if u, ok := strings.CutSuffix(e.ServerURL, suffix); ok && !strings.Contains(u, "#") {
			c := *e
			c.ServerURL = u
			mine = append(mine, &c)
		}
	}
	return mine, nil
}

func (ps principalStore) Lock(ctx context.Context, serverURL string) (func(), error) {
	return ps.inner.Lock(ctx, ps.key(serverURL))
}

// tlsClient returns the server's own HTTP client for its TLS settings:
// the one its connection uses, else a new one.
func (ah *authHolder) tlsClient(cfg *ServerConfig) (*http.Client, error) {
	ah.mu.Lock()
	c := ah.client
	ah.mu.Unlock()
	if c != nil {
		return c, nil
	}
	return httpclient.New(cfg.Config, httpclient.Options{})
}
