package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/cenkalti/backoff/v4"
	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/session"
	"github.com/mcpvisor/mcpvisor/transports"
)

// serverHandle is how the registry and callers reach one server. It
// outlives the server actor's instances (a restarted actor is a new
// instance on the same handle), so whatever must survive a restart lives
// here. The server actor is the only writer of every field after creation.
type serverHandle struct {
	name string
	pid  *actor.PID // set by the registry right after spawning

	view atomic.Pointer[serverView] // the latest published state

	gens     atomic.Uint64 // connection generations ever started; never reused
	admitted atomic.Uint64 // the ticket of the last connectNow received
	// busy counts the goroutines the actor started that have not yet
	// reported goroutineDone. Incremented when one starts, decremented when
	// its goroutineDone is received, so the actor never stops while one of
	// them may still send it a message (or own a process).
	busy atomic.Int32
	// running counts the same goroutines, but each decrements it itself
	// when it ends: the registry waits on it for an actor that supervision
	// stopped, which will never receive another goroutineDone.
	running sync.WaitGroup
	// stopped is set when the actor (any instance) has stopped for good, so
	// that its goroutines do not message a dead mailbox.
	stopped atomic.Bool
	// strikes counts the consecutive transient errors of the live
	// connection, from calls and pings (see recordOutcome); the actor
	// clears it for each new connection.
	strikes atomic.Int32
	memory  session.Memory
	// sseOnly is set when a url-only server was found to speak only
	// HTTP+SSE (fallback.go); its reconnects go straight to it.
	sseOnly atomic.Bool
	changed changeSignal // fires on every new view
	// latency counts the requests sent on the server's sessions
	// (onSession); any goroutine observes it.
	latency latencyHist
	auth    authHolder // the server's OAuth token source (auth.go)
}

// changeSignal lets goroutines wait for the next change of something. The
// zero value is ready; it allocates only while someone waits.
type changeSignal struct {
	mu sync.Mutex
	ch chan struct{} // guarded by mu; closed and cleared by notify
}

// next returns a channel closed at the next notify.
func (c *changeSignal) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

func (c *changeSignal) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// serverView is an immutable snapshot of one server, published by its
// actor on every change. Callers read it without a mailbox hop.
type serverView struct {
	name            string
	cfg             ServerConfig
	sseOnly         bool // a url-only server found to speak only HTTP+SSE (fallback.go)
	state           State
	since           time.Time
	admitted        uint64           // ticket of the connect this view answers
	gen             uint64           // generation of the current connect attempt or session
	sess            *session.Session // non-nil exactly when state is ready
	lists           lists            // what the server offered when last connected
	err             error
	failure         FailureKind // ClassifyFailure(err)
	connectedSince  time.Time
	protocolVersion string
	serverInfo      protocol.Implementation
	// recovering is set while the server reconnects after it was ready:
	// its tools stay offered and calls wait for the new connection.
	recovering  bool
	attempt     int         // connect attempts in the current episode
	nextRetry   time.Time   // when the scheduled attempt starts, while reconnecting
	strikeLimit int         // ReconnectPolicy.Strikes of this server
	auth        *authHolder // the server's token source (read at status time)
	// pinOpts are the System's pin options (shared, read-only): with
	// lists.pins and cfg.Trust, they decide which tools are withheld.
	pinOpts *PinOptions
	// probeAfter and probeTimeout are the server's liveness probe
	// settings (ReconnectPolicy; probeAfter < 0: no probes).
	probeAfter, probeTimeout time.Duration
	// cached is set while lists.tools come from the discovery cache: the
	// lazy server has not connected in this run yet; loadingCache while
	// its entry is being read (the server is not settled).
	cached, loadingCache bool

	// offer caches what the view puts in the pool; written and read only
	// by the registry goroutine (see offerOf).
	offer *offer
}

// offersTools reports whether the server's tools belong in the pool: when
// it is ready, and while it recovers from a lost connection or an expired
// session.
func (v *serverView) offersTools() bool {
	switch v.state {
	case StateReady:
		return true
	case StatePending, StateConnecting, StateReconnecting:
		return v.recovering || v.cached
	}
	return false
}

// routesHiddenTools reports whether calls to the tools the server listed
// when last connected still reach it although they are not offered (see
// pool.hiddenTools).
func (v *serverView) routesHiddenTools() bool {
	return !v.offersTools() && len(v.lists.tools) > 0 && v.state != StateDisabled && v.state != StateStopped && v.state != StateNeedsApproval
}

// renewing reports whether the server is replacing a session the server
// expired, which is quick and not a failure.
func (v *serverView) renewing() bool {
	return v.recovering && v.failure == FailureSessionExpired && (v.state == StatePending || v.state == StateConnecting)
}

// status renders the view for hosts.
func (v *serverView) status() ServerStatus {
	st := ServerStatus{
		Name:            v.name,
		State:           v.state,
		Transport:       string(effectiveTransport(v.cfg, v.sseOnly)),
		ProtocolVersion: v.protocolVersion,
		ServerInfo:      v.serverInfo,
		Tools:           len(v.lists.tools),
		Resources:       len(v.lists.resources),
		Prompts:         len(v.lists.prompts),
		ConnectedSince:  v.connectedSince,
		StateSince:      v.since,
		Lazy:            v.cfg.Lazy,
		CachedTools:     v.cached,
		Attempt:         v.attempt,
		NextRetry:       v.nextRetry,
		Config:          v.cfg,
	}
	if v.err != nil {
		st.LastError = v.err.Error()
		st.LastErrorClass = transports.Classify(v.err).String()
		st.LastFailure = v.failure
	}
	if v.sess != nil {
		st.InFlight = v.sess.InFlight()
		if v.state == StateReady {
			hints := v.sess.CacheHints()
			caps := v.sess.Capabilities()
			st.Cache, st.Capabilities = &hints, &caps
		}
		if c, ok := v.sess.Conn().(interface {
			Sandbox() transports.SandboxMechanism
		}); ok {
			st.Sandbox = c.Sandbox()
		}
	}
	if v.auth != nil {
		st.Auth = v.auth.status()
	}
	st.WithheldTools = v.withheldTools()
	return st
}

// serverActor owns one server's connection: it alone starts connect
// attempts, installs and tears down sessions, and publishes the server's
// view. All its fields are touched only by Receive (the actor's
// goroutine); I/O runs in goroutines it starts, whose results come back as
// messages tagged with the connection generation.
type serverActor struct {
	h    *serverHandle
	opts *Options // the System's, shared by every server; read-only
	log  zerolog.Logger

	self, parent *actor.PID
	root         *actor.RootContext // for goroutines to message the actor

	cfg   ServerConfig
	state State
	since time.Time
	err   error

	gen            uint64             // generation of the current attempt or session
	cancelConnect  context.CancelFunc // non-nil while a connect attempt runs
	sess           *session.Session   // the ready session, if any
	lists          lists
	connectedSince time.Time

	policy      ReconnectPolicy             // Options.Reconnect with the server's overrides
	backoff     *backoff.ExponentialBackOff // delays of the current episode; nil outside one
	attempt     int                         // connect attempts in the current episode; 0 outside one
	nextRetry   time.Time                   // when the scheduled attempt starts; zero if none
	cancelRetry context.CancelFunc          // non-nil while a reconnect is scheduled
	// fullEpisode is set by resetEpisode (Reconnect) so that the next
	// connect of a parked server starts a full episode, not one wake-up
	// attempt.
	fullEpisode bool

	relisting   [numListKinds]bool // a re-list of that kind is in flight
	relistAgain [numListKinds]bool // a list_changed arrived during it

	// early holds the notifications of the connection being opened that
	// arrived before it was installed (a server may push as soon as it
	// answered tools/list, while the other lists are still on their
	// way); they are handled once it is (see holdEarly).
	early        []serverNotification
	earlyDropped int // notifications beyond maxEarly, dropped and logged

	recovering bool // reconnecting after being ready (see serverView.recovering)
	// cached is set while the tools come from the discovery cache, not
	// from a listing of this run (see discovery.go); loadingCache while
	// the entry is read, numbered by cacheSeq.
	cached       bool
	loadingCache bool
	cacheSeq     uint64

	// reportedPins maps each unpinned tool already reported by an
	// EventToolDefinitionChanged to the hash reported (see reportPins).
	reportedPins map[string]string

	stopping    bool
	stopWaiters []chan struct{}
}

func newServerActor(h *serverHandle, cfg ServerConfig, opts *Options) *serverActor {
	return &serverActor{
		h:      h,
		cfg:    cfg,
		opts:   opts,
		policy: cfg.Reconnect.over(opts.Reconnect),
		log:    serverLogger(opts.Logger, h.name),
	}
}

// testHookReceive, when set (by tests, before Start), sees every message
// a server actor receives before the actor does; a test injects a crash
// by panicking in it.
var testHookReceive atomic.Pointer[func(msg any)]

// Receive is the actor's message loop.
func (a *serverActor) Receive(ctx actor.Context) {
	if hook := testHookReceive.Load(); hook != nil {
		(*hook)(ctx.Message())
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self, a.parent, a.root = ctx.Self(), ctx.Parent(), ctx.ActorSystem().Root
		if prev := a.h.view.Load(); prev != nil {
			a.cfg = prev.cfg // a restarted instance keeps the latest config
			a.policy = a.cfg.Reconnect.over(a.opts.Reconnect)
		}
		a.loadCache()
		a.setState(initialState(a.cfg), heldError(a.cfg))
	case *actor.Restarting:
		a.log.Error().Msg("server actor restarting after a crash; its connection is dropped")
		a.abandon(session.ErrServerRestarting)
	case *actor.Stopping:
		a.abandon(session.ErrConnectionClosed)
	case *actor.Stopped:
		a.h.stopped.Store(true)
	case connectNow:
		a.h.admitted.Store(m.ticket)
		a.connect()
	case connectResult:
		a.connected(m)
	case cacheLoaded:
		a.cacheArrived(m)
	case connectionLost:
		a.lost(m)
	case serverNotification:
		a.notification(m)
	case relisted:
		a.relisted(m)
	case recheckPins:
		a.recheckPins()
	case pinsChecked:
		a.pinsChecked(m)
	case retryNow:
		a.retry(m)
	case stableNow:
		a.stable(m)
	case strikeOut:
		a.struckOut(m)
	case resetEpisode:
		a.endEpisode()
		a.fullEpisode = true
		a.publish()
	case reconfigure:
		a.reconfigure(m.cfg)
	case retune:
		a.retune(m.cfg)
	case shutdown:
		a.stopping = true
		a.stopWaiters = append(a.stopWaiters, m.done)
		a.abandon(session.ErrConnectionClosed)
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
	ev := a.log.Info()
	if s.Parked() || s == StateReconnecting {
		ev = a.log.Warn()
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
		attempt:        a.attempt,
		nextRetry:      a.nextRetry,
		strikeLimit:    a.policy.Strikes,
		probeAfter:     time.Duration(a.policy.ProbeAfter),
		probeTimeout:   time.Duration(a.policy.ProbeTimeout),
		cached:         a.cached,
		loadingCache:   a.loadingCache,
		auth:           &a.h.auth,
		pinOpts:        &a.opts.ToolPins,
		sseOnly:        a.h.sseOnly.Load(),
	}
	if a.state == StateReady && a.sess != nil {
		v.sess = a.sess
		v.protocolVersion = a.sess.ProtocolVersion()
		v.serverInfo = a.sess.ServerInfo()
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
	if a.state.Parked() && !a.fullEpisode {
		// Woken by a call: one fresh attempt; if it fails the server
		// parks again at once.
		a.attempt = max(a.attempt, a.policy.MaxAttempts, 0)
	}
	a.fullEpisode = false
	// A ready server being reconnected keeps offering its tools, as one
	// recovering from a lost connection does. The lists are kept in any
	// case (a parked server's still route calls that wake it) until the
	// new connection lists afresh.
	recovering := a.recovering || a.sess != nil || a.cached
	a.abandon(session.ErrServerRestarting)
	a.recovering = recovering
	a.gen = a.h.gens.Add(1)
	a.early, a.earlyDropped = nil, 0
	a.loadingCache = false // a load still running is ignored
	ctx, cancel := context.WithTimeout(context.Background(), a.connectTimeout())
	a.cancelConnect = cancel
	a.nextRetry = time.Time{}
	a.setState(StateConnecting, a.err)

	gen, cfg, self, root, name, h := a.gen, a.cfg, a.self, a.root, a.h.name, a.h
	sopts := a.sessionOptions(gen)
	dc := a.dialConfig()
	pinStore := a.opts.ToolPins.Store
	a.goroutine(func() {
		defer cancel()
		var res connectResult
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
		root.Send(self, res)
	})
}

// goroutine runs f in a goroutine that reports goroutineDone when it
// ends; see serverHandle.busy.
func (a *serverActor) goroutine(f func()) {
	a.h.busy.Add(1)
	a.h.running.Add(1)
	h, self, root := a.h, a.self, a.root
	a.opts.dispatch.Go(func() {
		f()
		h.running.Done()
		if !h.stopped.Load() {
			root.Send(self, goroutineDone{})
		}
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
	ls, err := listAll(ctx, sess)
	if err != nil {
		closeSession(sess, session.ErrConnectionClosed)
		return connectResult{err: err}
	}
	return connectResult{sess: sess, lists: ls}
}

// listAll lists everything a server offers, the four lists at once (one
// round trip of latency rather than four). Tools must list; a server
// whose resources or prompts fail to list still serves its tools.
func listAll(ctx context.Context, sess *session.Session) (lists, error) {
	var ls lists
	var wg sync.WaitGroup
	wg.Go(func() { ls.resources, _ = sess.ListResources(ctx) })
	wg.Go(func() { ls.templates, _ = sess.ListResourceTemplates(ctx) })
	wg.Go(func() { ls.prompts, _ = sess.ListPrompts(ctx) })
	var err error
	ls.tools, err = sess.ListTools(ctx)
	wg.Wait()
	if err != nil {
		return lists{}, fmt.Errorf("listing tools: %w", err)
	}
	return ls, nil
}

func (a *serverActor) sessionOptions(gen uint64) session.Options {
	return session.Options{
		ClientInfo:      a.opts.ClientInfo,
		Capabilities:    clientCapabilities(a.opts),
		Requests:        requestHandler(a.opts, a.h.name),
		Input:           inputHandler(a.opts, a.h.name),
		RequestTimeout:  a.opts.ServerRequestTimeout,
		ProtocolVersion: a.cfg.ProtocolVersion,
		Memory:          &a.h.memory,
		DiscoverTimeout: a.opts.DiscoverTimeout,
		Handler:         a.genHandler(gen),
		Logger:          a.log,
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
			a.closeInBackground(m.sess, session.ErrConnectionClosed)
		}
		return
	}
	a.cancelConnect = nil
	if m.err == nil && m.sess.Err() != nil {
		// The connection died between listing and now; its connectionLost
		// was ignored because no session was installed yet.
		a.closeInBackground(m.sess, m.sess.Err())
		m.err = m.sess.Err()
	}
	if m.err != nil {
		a.early, a.earlyDropped = nil, 0
		a.afterFailure(m.err, false)
		return
	}
	a.recovering, a.cached = false, false
	a.sess, a.lists, a.connectedSince = m.sess, m.lists, time.Now()
	a.h.strikes.Store(0)
	a.pinsFound(m.pinErr)
	a.setState(StateReady, nil)
	a.storeCache(m.lists.tools)
	a.startListening()
	a.startStableTimer()
	a.startPinging()
	a.restoreSubscriptions()
	a.replayEarly()
}

// lost handles the end of a live connection.
func (a *serverActor) lost(m connectionLost) {
	if m.gen != a.gen || a.sess == nil {
		return // a connection already replaced or torn down
	}
	sess := a.sess
	a.sess = nil
	a.closeInBackground(sess, m.err)
	a.relisting, a.relistAgain = [numListKinds]bool{}, [numListKinds]bool{}
	a.recovering = true
	if errors.Is(m.err, transports.ErrSessionExpired) {
		// The server forgot the session (it restarted, or expires idle
		// sessions): initialize a new one at once. Not a failure.
		a.log.Info().Msg("session expired; initializing a new one")
		a.setState(StatePending, m.err)
		return
	}
	a.afterFailure(m.err, true)
}

// abandon cancels a running connect attempt and tears down the session,
// failing its pending calls with cause.
func (a *serverActor) abandon(cause error) {
	a.cancelReconnect()
	a.recovering = false
	if a.cancelConnect != nil {
		a.cancelConnect()
		a.cancelConnect = nil
	}
	if a.sess != nil {
		a.closeInBackground(a.sess, cause)
		a.sess = nil
	}
	a.relisting, a.relistAgain = [numListKinds]bool{}, [numListKinds]bool{}
}

// closeInBackground fails the session's pending calls now and runs the
// transport's shutdown ladder in a goroutine.
func (a *serverActor) closeInBackground(sess *session.Session, cause error) {
	a.goroutine(func() { closeSession(sess, cause) })
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
	if cfg.Kind() != a.cfg.Kind() || cfg.Command != a.cfg.Command || cfg.URL != a.cfg.URL {
		a.h.memory.Forget() // possibly another server altogether
		a.h.sseOnly.Store(false)
	}
	a.cfg = cfg
	a.policy = cfg.Reconnect.over(a.opts.Reconnect)
	a.lists, a.cached = lists{}, false
	a.endEpisode()
	a.loadCache()
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

// listKind names one of the lists a server offers.
type listKind int

const (
	listTools listKind = iota
	listResources
	listPrompts
	numListKinds
)

var listChangedKinds = map[string]listKind{
	protocol.NotificationToolsListChanged:     listTools,
	protocol.NotificationResourcesListChanged: listResources,
	protocol.NotificationPromptsListChanged:   listPrompts,
}

// notification handles a notification from the server. list_changed is
// honoured even from servers that did not declare listChanged.
func (a *serverActor) notification(m serverNotification) {
	if m.gen != a.gen {
		return
	}
	if a.sess == nil {
		if a.cancelConnect != nil {
			a.holdEarly(m)
		}
		return
	}
	if kind, ok := listChangedKinds[m.method]; ok {
		a.relist(kind)
		return
	}
	if m.method == protocol.NotificationSubscriptionsAck {
		// A listen stream (re)opened: what changed before it was not
		// announced, so list again what it covers.
		var ack protocol.SubscriptionsAcknowledgedParams
		if json.Unmarshal(m.params, &ack) == nil {
			if ack.Notifications.ToolsListChanged {
				a.relist(listTools)
			}
			if ack.Notifications.ResourcesListChanged {
				a.relist(listResources)
			}
			if ack.Notifications.PromptsListChanged {
				a.relist(listPrompts)
			}
		}
		return
	}
	if ev, ok := a.hostNotification(m.method, m.params); ok {
		if ev.Type != "" && a.parent != nil {
			a.root.Send(a.parent, serverEvent{handle: a.h, event: ev})
		}
		return
	}
	if ev, ok := notificationEvent(m.method, m.params); ok {
		if a.parent != nil {
			a.root.Send(a.parent, serverEvent{handle: a.h, event: ev})
		}
		return
	}
	a.log.Debug().Str("method", m.method).Msg("notification")
}

// notificationEvent turns a notification a host hears about into its
// event (without Server, Seq and Time, which the registry sets).
func notificationEvent(method string, params json.RawMessage) (Event, bool) {
	switch method {
	case protocol.NotificationResourceUpdated:
		var p struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(params, &p)
		return Event{Type: EventResourceUpdated, URI: p.URI, Data: params}, true
	case protocol.NotificationMessage:
		var p struct {
			Level string `json:"level"`
		}
		_ = json.Unmarshal(params, &p)
		return Event{Type: EventLogMessage, Level: p.Level, Data: params}, true
	case protocol.NotificationProgress:
		return Event{Type: EventProgress, Data: params}, true
	case protocol.NotificationChannel:
		return Event{Type: EventChannelMessage, Data: params}, true
	case protocol.NotificationChannelPermissionRequest:
		return Event{Type: EventPermissionRequest, Data: params}, true
	}
	return Event{}, false
}

// maxEarly bounds the notifications kept while a connection is being
// installed (see serverActor.early).
const maxEarly = 4096

// holdEarly keeps a notification of the connection being opened until it
// is installed.
func (a *serverActor) holdEarly(m serverNotification) {
	if len(a.early) >= maxEarly {
		a.earlyDropped++
		return
	}
	a.early = append(a.early, m)
}

// replayEarly handles the notifications that arrived while the new
// connection was being installed, in their order.
func (a *serverActor) replayEarly() {
	early, dropped := a.early, a.earlyDropped
	a.early, a.earlyDropped = nil, 0
	if dropped > 0 {
		a.log.Warn().Int("dropped", dropped).Int("kept", len(early)).Msg("notifications sent before the connection was ready exceeded the buffer; the oldest were kept")
	}
	for _, m := range early {
		a.notification(m)
	}
}

// relist re-lists one kind, at most one request in flight per kind; a
// burst of notifications during a re-list costs one more re-list.
func (a *serverActor) relist(kind listKind) {
	if a.relisting[kind] {
		a.relistAgain[kind] = true
		return
	}
	a.relisting[kind] = true
	sess, gen, self, root := a.sess, a.gen, a.self, a.root
	timeout := a.connectTimeout()
	pinStore, name, cfg := a.opts.ToolPins.Store, a.h.name, a.cfg
	a.goroutine(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var ls lists
		var err, pinErr error
		switch kind {
		case listTools:
			if ls.tools, err = sess.ListTools(ctx); err == nil {
				ls.pins, pinErr = checkPins(pinStore, name, cfg, ls.tools)
			}
		case listResources:
			if ls.resources, err = sess.ListResources(ctx); err == nil {
				ls.templates, err = sess.ListResourceTemplates(ctx)
			}
		case listPrompts:
			ls.prompts, err = sess.ListPrompts(ctx)
		}
		root.Send(self, relisted{gen: gen, kind: kind, lists: ls, err: err, pinErr: pinErr})
	})
}

func (a *serverActor) relisted(m relisted) {
	if m.gen != a.gen || a.sess == nil {
		return
	}
	a.relisting[m.kind] = false
	if m.err != nil {
		a.log.Warn().Err(m.err).Int("kind", int(m.kind)).Msg("re-listing after list_changed failed; keeping the previous list")
	} else {
		before := a.lists
		switch m.kind {
		case listTools:
			a.lists.tools, a.lists.pins = m.lists.tools, m.lists.pins
			a.storeCache(m.lists.tools)
		case listResources:
			a.lists.resources, a.lists.templates = m.lists.resources, m.lists.templates
		case listPrompts:
			a.lists.prompts = m.lists.prompts
		}
		if m.kind == listTools {
			// Before the view: the reason a tool leaves the pool comes
			// before the pool's diff (see pinsFound).
			a.pinsFound(m.pinErr)
		}
		// A re-list that finds nothing new (after a listen stream opened,
		// or a spurious list_changed) changes nothing for subscribers.
		if !reflect.DeepEqual(before, a.lists) {
			a.publish()
		} else {
			a.lists = before
		}
	}
	if a.relistAgain[m.kind] {
		a.relistAgain[m.kind] = false
		a.relist(m.kind)
	}
}

// genHandler forwards one generation's notifications to the actor.
// Progress goes to the waiting call first, from the session's receive
// goroutine itself: through the actor's mailbox, the last report could
// arrive after the call's result, which the receive goroutine completes
// directly.
type genHandler struct {
	root     *actor.RootContext
	self     *actor.PID
	gen      uint64
	server   string
	progress *progressRoutes // nil without a host
}

func (h *genHandler) Notification(method string, params json.RawMessage) {
	if method == protocol.NotificationProgress && h.progress != nil {
		h.progress.deliver(h.server, params)
	}
	h.root.Send(h.self, serverNotification{gen: h.gen, method: method, params: params})
}

func (h *genHandler) Closed(err error) {
	h.root.Send(h.self, connectionLost{gen: h.gen, err: err})
}

// Errors of the supervision core. The root package re-exports them.
var (
	// ErrUnsupportedTransport: the config names a transport this build
	// cannot use.
	ErrUnsupportedTransport = errors.New("mcpvisor: unsupported transport")
)
