package mcpvisor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/transports"
)

// serverActor owns one server's connection: it alone starts connect
// attempts, installs and tears down sessions, and publishes the server's
// view. Its own methods are the message loop, the connection's life
// (connect, install, loss, config changes, stop) and the view; the rest
// is done by parts with one job each, held in its fields:
//
//   - goroutines (serverGoroutines, server_goroutines.go): starts and
//     counts every goroutine of the actor.
//   - reconnect (reconnectEpisode, reconnect.go): the failure policy:
//     parking, reconnects with backoff, strikes, pings, the stable timer.
//   - relister (relister, server_lists.go): keeps the live connection's
//     lists current: re-lists, retries of refused listings, the listen
//     stream.
//   - notifications (notificationRouter, server_notify.go): routes the
//     server's notifications, holding those of a connection not yet
//     installed.
//   - cache (cachedTools, discovery.go): the tools offered before a
//     listing of this run (discovery cache, a principal's listing).
//   - pinReports (pinReporter, pins.go): reports unpinned tool
//     definitions, rechecks the pins.
//
// The connection's credentials are the handle's (serverHandle.authClient,
// auth_source.go), shared with Login and the principals' sessions.
//
// Concurrency: all its fields, its parts' included, are touched only by
// Receive (the actor's goroutine); I/O runs in goroutines it starts
// (serverGoroutines), whose results come back as messages tagged with the
// connection generation. What others read of the server is on the handle.
type serverActor struct {
	h    *serverHandle
	opts *runOptions // the Supervisor's, shared by every server; read-only
	log  zerolog.Logger

	self, parent *actor.PID
	root         *actor.RootContext // for goroutines to message the actor

	// goroutines starts every goroutine of the actor and counts it on
	// the handle (server_goroutines.go); the actor's goroutine.
	goroutines serverGoroutines

	cfg   ServerConfig
	state State
	since time.Time
	err   error

	gen            uint64             // generation of the current attempt or session
	cancelConnect  context.CancelFunc // non-nil while a connect attempt runs
	sess           *session.Session   // the ready session, if any
	lists          lists
	connectedSince time.Time

	policy ReconnectPolicy // Options.Reconnect with the server's overrides
	// reconnect is the failure policy's episode: what a failure leads
	// to, the backoff between attempts, the strikes (reconnect.go); the
	// actor's goroutine.
	reconnect reconnectEpisode

	// relister keeps the live connection's lists current: re-lists,
	// retries of refused listings, the listen stream (server_lists.go);
	// the actor's goroutine.
	relister relister
	// notifications routes the server's notifications, holding those
	// that arrive before their connection is installed
	// (server_notify.go); the actor's goroutine.
	notifications notificationRouter

	recovering bool // reconnecting after being ready (see serverView.recovering)
	// cache offers tools before a listing of this run: the discovery
	// cache's, or a principal's (discovery.go); the actor's goroutine.
	cache cachedTools
	// pinReports reports the tools whose definitions are not pinned, and
	// rechecks them (pins.go); the actor's goroutine.
	pinReports pinReporter

	stopping    bool
	stopWaiters []chan struct{}
}

func newServerActor(h *serverHandle, cfg ServerConfig, opts *runOptions) *serverActor {
	a := &serverActor{
		h:          h,
		cfg:        cfg,
		opts:       opts,
		policy:     cfg.Reconnect.over(opts.Reconnect),
		log:        serverLogger(opts.Logger, h.name),
		goroutines: serverGoroutines{h: h, dispatch: opts.dispatch},
	}
	a.reconnect.a, a.relister.a, a.notifications.a = a, a, a
	a.cache.a, a.pinReports.a = a, a
	return a
}

// Receive is the actor's message loop.
func (a *serverActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self, a.parent, a.root = ctx.Self(), ctx.Parent(), ctx.ActorSystem().Root
		a.goroutines.self, a.goroutines.root = a.self, a.root
		if prev := a.h.view.Load(); prev != nil {
			a.cfg = prev.cfg // a restarted instance keeps the latest config
			a.policy = a.cfg.Reconnect.over(a.opts.Reconnect)
		}
		a.cache.load()
		a.setState(initialState(a.cfg), heldError(a.cfg))
	case *actor.Restarting:
		a.log.Error().Msg("server actor restarting after a crash; its connection is dropped")
		a.abandon(session.ErrServerRestarting)
		a.h.users.closeAll(session.ErrServerRestarting)
	case *actor.Stopping:
		a.abandon(session.ErrConnectionClosed)
		a.h.users.stop(session.ErrConnectionClosed)
	case *actor.Stopped:
		a.h.stopped.Store(true)
	case connectNow:
		a.h.admitted.Store(m.ticket)
		a.connect()
	case connectResult:
		a.connected(m)
		if m.last {
			a.h.busy.Add(-1)
			a.maybeStop(ctx)
		}
	case cacheLoaded:
		a.cache.arrived(m)
	case userListed:
		a.cache.userListed(m) // discovery.go
	case connectionLost:
		a.lost(m)
	case serverNotification:
		a.notifications.route(m)
	case relisted:
		a.relister.relisted(m)
	case relistNow:
		a.relister.timer(m)
	case recheckPins:
		a.pinReports.recheck()
	case pinsChecked:
		a.pinReports.checked(m)
	case retryNow:
		a.reconnect.retry(m)
	case stableNow:
		a.reconnect.stable(m)
	case strikeOut:
		a.reconnect.struckOut(m)
	case resetEpisode:
		a.reconnect.reset()
		a.publish()
	case reconfigure:
		a.reconfigure(m.cfg)
	case retune:
		a.retune(m.cfg)
	case shutdown:
		a.stopping = true
		a.stopWaiters = append(a.stopWaiters, m.done)
		a.abandon(session.ErrConnectionClosed)
		a.h.users.stop(session.ErrConnectionClosed)
		a.maybeStop(ctx)
	case goroutineDone:
		a.h.busy.Add(-1)
		a.maybeStop(ctx)
	}
}

// setState records a transition and publishes the new view.
func (a *serverActor) setState(s State, err error) {
	prev := a.state
	if s != prev {
		a.since = time.Now()
	}
	a.state, a.err = s, err
	// A warning once per failure episode: its first reconnect, and when
	// it is parked; the later attempts of an episode are info.
	ev := a.log.Info()
	if s.Parked() || s == StateReconnecting && a.reconnect.attempt <= 1 {
		ev = a.log.Warn()
	}
	if s.Parked() {
		// Parked: it makes no request until woken by a call, Reconnect
		// or a config change; this line is how a host's log says why.
		ev.Str("failure", string(ClassifyFailure(err)))
	}
	if s != prev && prev != "" {
		ev.Str("from", string(prev)).Str("to", string(s)).AnErr("error", err).Msg("server state")
	}
	a.publish()
}

// publish stores a new view and tells the registry.
func (a *serverActor) publish() {
	v := &serverView{
		name:           a.h.name,
		cfg:            a.cfg,
		state:          a.state,
		since:          a.since,
		admitted:       a.h.admitted.Load(),
		gen:            a.gen,
		lists:          a.lists,
		err:            a.err,
		failure:        ClassifyFailure(a.err),
		connectedSince: a.connectedSince,
		recovering:     a.recovering,
		attempt:        a.reconnect.attempt,
		nextRetry:      a.reconnect.nextRetry,
		strikeLimit:    a.policy.Strikes,
		probeAfter:     time.Duration(a.policy.ProbeAfter),
		probeTimeout:   time.Duration(a.policy.ProbeTimeout),
		cached:         a.cache.cached,
		loadingCache:   a.cache.loading,
		auth:           &a.h.auth,
		pinOpts:        &a.opts.ToolPins,
		sseOnly:        a.h.sseOnly.Load(),
		listErrors:     a.relister.errors(),
	}
	if a.state == StateReady && a.sess != nil {
		v.sess = a.sess
		v.protocolVersion = a.sess.Peer().Version
		v.serverInfo = a.sess.Peer().Info
	}
	a.h.view.Store(v)
	a.h.changed.notify()
	if a.parent != nil {
		a.root.Send(a.parent, serverChanged{name: a.h.name, handle: a.h, view: v})
	}
}

// connect starts a connect attempt, replacing whatever connection exists.
func (a *serverActor) connect() {
	if a.stopping || !a.cfg.startable() {
		a.publish() // answers the admission ticket without connecting
		return
	}
	if a.state.Parked() && !a.reconnect.fullEpisode {
		// Woken by a call: one fresh attempt; if it fails the server
		// parks again at once.
		a.reconnect.attempt = max(a.reconnect.attempt, a.policy.MaxAttempts, 0)
	}
	a.reconnect.fullEpisode = false
	// A ready server being reconnected keeps offering its tools, as one
	// recovering from a lost connection does. The lists are kept in any
	// case (a parked server's still route calls that wake it) until the
	// new connection lists afresh.
	recovering := a.recovering || a.sess != nil || a.cache.cached
	reconnect := a.recovering || a.sess != nil // for the span: a connection is replaced
	a.abandon(session.ErrServerRestarting)
	a.recovering = recovering
	a.gen = a.h.gens.Add(1)
	a.notifications.forgetHeld()
	a.cache.loading = false // a load still running is ignored
	ctx, cancel := context.WithTimeout(context.Background(), a.connectTimeout())
	a.cancelConnect = cancel
	a.reconnect.nextRetry = time.Time{}
	a.setState(StateConnecting, a.err)

	gen, cfg, name, h := a.gen, a.cfg, a.h.name, a.h
	sopts := a.sessionOptions(gen)
	dc := a.dialConfig()
	pinStore := a.opts.ToolPins.Store
	tracer, attempt := a.opts.tracer, a.reconnect.attempt
	gate, ticket := a.opts.admission, a.h.admitted.Load()
	a.goroutines.startEndingWith("server.connect", func() (res connectResult) {
		defer cancel()
		ctx, span := startConnectSpan(ctx, tracer, name, cfg, attempt, reconnect)
		defer func() { endConnectSpan(span, res) }()
		if autoTransport(cfg) {
			res = connectAuto(ctx, cfg, sopts, dc, &h.sseOnly)
		} else {
			res = connectOnce(ctx, cfg, sopts, dc)
		}
		res.gen = gen
		if res.err == nil {
			res.lists.pins, res.pinErr = checkPins(pinStore, name, cfg, res.lists.tools)
		}
		if res.sess != nil && ctx.Err() != nil {
			// Abandoned while listing: close here, nobody will take it.
			closeSession(res.sess, session.ErrConnectionClosed)
			res.sess, res.err = nil, fmt.Errorf("connect abandoned: %w", context.Cause(ctx))
		}
		if gate != nil && ctx.Err() == nil {
			// The slot goes to the next server now, not once this
			// result has passed through the actor and the registry (an
			// abandoned attempt's slot is freed by the one that
			// replaced it).
			gate.release(name, ticket)
		}
		return res
	})
}

// connectOnce dials, negotiates and lists. It runs in its own goroutine.
func connectOnce(ctx context.Context, cfg ServerConfig, sopts session.Options, dc dialConfig) connectResult {
	dial, err := dialer(cfg, dc)
	if err != nil {
		return connectResult{err: err}
	}
	sess, err := session.Open(ctx, dial, sopts)
	if err != nil {
		return connectResult{err: fmt.Errorf("connect: %w", err)}
	}
	listen := openListenFirst(ctx, sess) // listen_first.go: before the lists
	ls, listErrs, err := listAll(ctx, sess)
	if err != nil {
		closeSession(sess, session.ErrConnectionClosed)
		return connectResult{err: err}
	}
	return connectResult{sess: sess, lists: ls, listErrs: listErrs, listen: listen}
}

// listAll lists everything a server offers, the four lists at once (one
// round trip of latency rather than four). A list the server answers
// with a JSON-RPC error (a server that is up but cannot list) does not
// fail the connect: that kind is empty and its error is returned in
// listErrs, to be retried on the live connection (see server_lists.go).
// Any other failure of the tools listing (the connection broke, the
// listing timed out) fails the connect. Resource templates are optional:
// a failure to list them leaves them empty.
func listAll(ctx context.Context, sess *session.Session) (ls lists, listErrs [numListKinds]error, err error) {
	var wg sync.WaitGroup
	// A kind the server did not declare lists as empty without a request:
	// no goroutine for it.
	caps := sess.Peer().Capabilities
	if caps.Resources != nil {
		wg.Go(func() { ls.resources, listErrs[listResources] = sess.Lists().Resources(ctx) })
		wg.Go(func() { ls.templates, _ = sess.Lists().ResourceTemplates(ctx) })
	}
	if caps.Prompts != nil {
		wg.Go(func() { ls.prompts, listErrs[listPrompts] = sess.Lists().Prompts(ctx) })
	}
	ls.tools, listErrs[listTools] = sess.Lists().Tools(ctx)
	wg.Wait()
	if err := listErrs[listTools]; err != nil && !serverRefused(err) {
		return lists{}, listErrs, fmt.Errorf("listing tools: %w", err)
	}
	return ls, listErrs, nil
}

func (a *serverActor) sessionOptions(gen uint64) session.Options {
	return sessionOptionsFor(a.h, &a.cfg, a.opts, a.log, a.genHandler(gen))
}

// sessionOptionsFor are the session options of server h's connections
// with config cfg, their notifications going to handler: the server
// actor's connection, and the per-principal sessions.
func sessionOptionsFor(h *serverHandle, cfg *ServerConfig, opts *runOptions, log zerolog.Logger, handler session.Handler) session.Options {
	return session.Options{
		ClientInfo:      opts.ClientInfo,
		Capabilities:    clientCapabilities(&opts.Options),
		Requests:        requestHandler(opts, h.name),
		Input:           inputHandler(&opts.Options, h.name),
		RequestTimeout:  opts.ServerRequestTimeout,
		ProtocolVersion: cfg.ProtocolVersion,
		Memory:          &h.memory,
		DiscoverTimeout: opts.DiscoverTimeout,
		LogLevel:        logLevelOf(h),
		Handler:         handler,
		Logger:          log,
		Tracing:         sessionTracing(opts.tracer, h.name, *cfg),
	}
}

func (a *serverActor) genHandler(gen uint64) *genHandler {
	h := &genHandler{root: a.root, self: a.self, gen: gen, server: a.h.name}
	if a.opts.host != nil {
		h.progress = a.opts.host.progress
	}
	return h
}

// connected installs the result of a connect attempt.
func (a *serverActor) connected(m connectResult) {
	if m.gen != a.gen || a.stopping || a.cancelConnect == nil {
		if m.sess != nil {
			a.goroutines.closeInBackground(m.sess, session.ErrConnectionClosed)
		}
		return
	}
	a.cancelConnect = nil
	if m.err == nil && m.sess.Err() != nil {
		// The connection died between listing and now; its connectionLost
		// was ignored because no session was installed yet.
		a.goroutines.closeInBackground(m.sess, m.sess.Err())
		m.err = m.sess.Err()
	}
	if m.err != nil {
		a.notifications.forgetHeld()
		a.reconnect.afterFailure(m.err, false)
		return
	}
	a.recovering, a.cache.cached = false, false
	a.sess, a.lists, a.connectedSince = m.sess, m.lists, time.Now()
	a.relister.firstListen = m.listen
	a.h.strikes.Store(0)
	a.pinReports.found(m.pinErr)
	a.setState(StateReady, nil)
	if a.relister.failedAll(m.listErrs) {
		a.publish()
	}
	if m.listErrs[listTools] == nil {
		a.cache.store(m.lists.tools) // never the empty list of a refusal
	}
	a.logLevelAfterConnect()
	a.relister.startListening(m.listen)
	a.reconnect.startStableTimer()
	a.reconnect.startPinging()
	a.restoreSubscriptions()
	a.notifications.replay()
}

// lost handles the end of a live connection.
func (a *serverActor) lost(m connectionLost) {
	if m.gen != a.gen || a.sess == nil {
		return // a connection already replaced or torn down
	}
	sess := a.sess
	a.sess = nil
	a.goroutines.closeInBackground(sess, m.err)
	a.relister.forgetInFlight()
	a.relister.forgetRetries()
	a.recovering = true
	if errors.Is(m.err, transports.ErrSessionExpired) {
		// The server forgot the session (it restarted, or expires idle
		// sessions): initialize a new one at once. Not a failure.
		a.log.Info().Msg("session expired; initializing a new one")
		a.setState(StatePending, m.err)
		return
	}
	a.reconnect.afterFailure(m.err, true)
}

// abandon cancels a running connect attempt and tears down the session,
// failing its pending calls with cause.
func (a *serverActor) abandon(cause error) {
	a.reconnect.cancel()
	a.recovering = false
	if a.cancelConnect != nil {
		a.cancelConnect()
		a.cancelConnect = nil
	}
	if a.sess != nil {
		a.goroutines.closeInBackground(a.sess, cause)
		a.sess = nil
	}
	a.relister.forgetInFlight()
	a.relister.forgetRetries()
}

// closeTimeout bounds one session close; the stdio ladder itself takes at
// most CloseStdinTimeout + TerminateTimeout + a few seconds.
const closeTimeout = 30 * time.Second

func closeSession(sess *session.Session, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = sess.Close(ctx, cause)
}

// connectTimeout bounds one connect (and one re-list): the server's
// connectTimeoutMs, else Options.ConnectTimeout.
func (a *serverActor) connectTimeout() time.Duration {
	if ms := a.cfg.ConnectTimeoutMs; ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return a.opts.ConnectTimeout
}

// retune applies a config change that needs no new connection (trust,
// tool filter, call timeout, laziness, reconnect policy): the next view
// carries it, so the pool applies it at once.
func (a *serverActor) retune(cfg ServerConfig) {
	a.cfg = cfg
	a.policy = cfg.Reconnect.over(a.opts.Reconnect)
	a.publish()
}

// reconfigure applies a changed config: the connection is dropped and the
// server waits for admission again (or is disabled, or held).
func (a *serverActor) reconfigure(cfg ServerConfig) {
	a.abandon(session.ErrServerRestarting)
	a.h.users.closeAll(session.ErrServerRestarting) // the principals' sessions had the old config
	if cfg.Kind() != a.cfg.Kind() || cfg.Command != a.cfg.Command || cfg.URL != a.cfg.URL {
		a.h.memory.Forget() // possibly another server altogether
		a.h.sseOnly.Store(false)
	}
	a.cfg = cfg
	a.policy = cfg.Reconnect.over(a.opts.Reconnect)
	a.lists, a.cache.cached = lists{}, false
	a.reconnect.end()
	a.cache.load()
	a.setState(initialState(cfg), heldError(cfg))
}

// heldError is the error a held server reports (nil for any other).
func heldError(cfg ServerConfig) error {
	if !cfg.held() {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNeedsApproval, cfg.NeedsApproval)
}

// maybeStop finishes a shutdown once nothing of the server remains.
func (a *serverActor) maybeStop(ctx actor.Context) {
	if !a.stopping || a.h.busy.Load() > 0 || a.sess != nil || a.cancelConnect != nil {
		return
	}
	a.lists = lists{}
	a.setState(StateStopped, a.err)
	for _, done := range a.stopWaiters {
		close(done)
	}
	a.stopWaiters = nil
	ctx.Stop(a.self)
}

// Errors of connecting a server.
var (
	// ErrUnsupportedTransport: the config names a transport this build
	// cannot use.
	ErrUnsupportedTransport = errors.New("mcpvisor: unsupported transport")
)
