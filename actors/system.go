package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/session"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/httpclient"
	"github.com/mcpvisor/mcpvisor/transports/stdio/reaper"
)

// Errors of the supervision core. The root package re-exports them.
var (
	// ErrClosed: the supervisor has been closed.
	ErrClosed = errors.New("mcpvisor: supervisor closed")
	// ErrUnknownTool: no ready server offers a tool by that name.
	ErrUnknownTool = errors.New("mcpvisor: unknown tool")
	// ErrUnknownPrompt: no ready server offers a prompt by that name.
	ErrUnknownPrompt = errors.New("mcpvisor: unknown prompt")
	// ErrUnknownServer: no server by that name is configured.
	ErrUnknownServer = errors.New("mcpvisor: unknown server")
	// ErrServerNotReady: the server is not connected; a *NotReadyError
	// says in which state it is and why.
	ErrServerNotReady = errors.New("mcpvisor: server not ready")
	// ErrNeedsApproval: the server is held until the user approves its
	// config entry (ServerConfig.NeedsApproval): it is never started.
	// The error of a held server's status wraps it with the reason.
	ErrNeedsApproval = errors.New("mcpvisor: server needs approval")
	// ErrServerOff: the host toggled the server off (Toggle); its
	// connection is kept, but nothing of it is offered or callable.
	ErrServerOff = errors.New("mcpvisor: server toggled off")
	// ErrHostTool: the built-in tool has no Call function; the host runs
	// it itself.
	ErrHostTool = errors.New("mcpvisor: built-in tool run by the host")
	// ErrRootsNotDeclared: SetRoots needs the roots capability, declared
	// by a non-nil Options.Roots at Start.
	ErrRootsNotDeclared = errors.New("mcpvisor: roots not declared (Options.Roots is nil)")
)

// NotReadyError reports a call to a server that is not ready. It matches
// ErrServerNotReady and unwraps to the server's last error, if any, and to
// why the call stopped waiting, if it waited.
type NotReadyError struct {
	Server string
	State  State
	Cause  error // the server's last error
	// Waited is set when the call waited for the server and its context
	// ended first: context.DeadlineExceeded or the cancellation cause.
	Waited error
}

func (e *NotReadyError) Error() string {
	msg := fmt.Sprintf("mcpvisor: server %q is %s", e.Server, e.State)
	if e.Waited != nil {
		msg = fmt.Sprintf("mcpvisor: server %q still %s when the call gave up waiting (%v)", e.Server, e.State, e.Waited)
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Is makes a NotReadyError match ErrServerNotReady.
func (e *NotReadyError) Is(target error) bool { return target == ErrServerNotReady }

// Unwrap returns the server's last error and why the call gave up.
func (e *NotReadyError) Unwrap() []error {
	var errs []error
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	if e.Waited != nil {
		errs = append(errs, e.Waited)
	}
	return errs
}

// ConnectionLostError reports a call whose connection ended before it was
// answered: the server's process exited, the transport broke, or the
// supervisor tore the connection down to replace it. The call may or may
// not have been carried out by the server. It matches ErrConnectionClosed
// or ErrServerRestarting (whichever Err does).
type ConnectionLostError struct {
	Server string
	// Attempt is the number of the reconnect attempt the loss of this
	// connection leads to: 1 when the connection was the first of its
	// reconnect episode, n+1 when it was made by the episode's attempt n.
	// (A session that merely expired, or a server out of budget, may make
	// no such attempt.)
	Attempt int
	Err     error
}

func (e *ConnectionLostError) Error() string {
	return fmt.Sprintf("mcpvisor: server %q: %v (reconnect attempt %d)", e.Server, e.Err, e.Attempt)
}

// Unwrap returns the session's error.
func (e *ConnectionLostError) Unwrap() error { return e.Err }

// System is a running supervision core: an actor system with one
// registry actor and one server actor per configured server.
//
// Concurrency: every method is safe for concurrent use. Lifecycle
// requests (SetServers, Reconnect, Subscribe, Close) are messages to the
// registry; queries and calls read the snapshots the actors publish
// (pool, handles, views) and never wait on a mailbox.
type System struct {
	opts   Options
	log    zerolog.Logger
	actors *actor.ActorSystem

	registry *actor.PID
	pool     atomic.Pointer[pool] // written by the registry
	// poolChanged fires after every new pool (for calls waiting for a lazy
	// server's tools).
	poolChanged changeSignal
	handles     atomic.Pointer[[]*serverHandle] // written by the registry; sorted by name

	// unsubscribers holds the context.AfterFunc registrations of live
	// subscriptions, stopped on Close so none fires at a stopped registry.
	subMu         sync.Mutex
	unsubscribers map[*subscriber]func() bool // guarded by subMu

	// probes counts the liveness watcher's probes in flight (liveness.go);
	// watching is closed when the watcher has returned.
	probes   sync.WaitGroup
	watching chan struct{}

	closed    chan struct{} // closed when Close starts
	closeOnce sync.Once
	closeErr  error
	closeDone chan struct{}

	// releaseHelper lets the process helper (package reaper) stop once
	// the supervisor is closed and its servers are gone.
	releaseHelper func()
}

// Start starts the supervision core with no servers.
func Start(opts Options) (*System, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	shared, err := httpclient.New(transports.Config{}, httpclient.Options{Unlimited: true})
	if err != nil {
		return nil, err
	}
	opts.sharedHTTP = shared
	opts.host = newHostState(opts)
	opts.dispatch = newWarmDispatcher(mailboxThroughput, maxIdleWorkers)
	s := &System{
		opts:          opts,
		log:           opts.Logger,
		unsubscribers: map[*subscriber]func() bool{},
		closed:        make(chan struct{}),
		closeDone:     make(chan struct{}),
		// The helper, once started, outlives the restarts of servers.
		releaseHelper: reaper.Hold(),
	}
	s.pool.Store(buildPool(nil, opts.Builtins, opts.MaxDescriptionLength, nil))
	s.handles.Store(&[]*serverHandle{})
	s.actors = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return newSlogLogger(opts.Logger) }),
		actor.WithDeadLetterRequestLogging(false),
		// Protoactor's dead-letter log throttle keeps a goroutine for one
		// interval after each burst; a short one keeps Close tidy.
		actor.WithDeadLetterThrottleInterval(100*time.Millisecond),
	)
	props := actor.PropsFromProducer(func() actor.Actor { return newRegistry(s) },
		// The registry's own crash resumes it with its state: restarting it
		// would stop every server actor (its children).
		actor.WithGuardian(actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.ResumeDirective })),
		// A server actor that crashes restarts into a clean state; one that
		// crashes three times within a minute is stopped (and marked failed).
		actor.WithSupervisor(actor.NewOneForOneStrategy(3, time.Minute, func(any) actor.Directive { return actor.RestartDirective })),
		actor.WithReceiverMiddleware(recoverMiddleware(opts.Logger)),
		actor.WithDispatcher(s.opts.dispatch),
	)
	pid, err := s.actors.Root.SpawnNamed(props, "registry")
	if err != nil {
		s.actors.Shutdown()
		s.opts.dispatch.stop()
		s.releaseHelper()
		return nil, fmt.Errorf("mcpvisor: starting the registry: %w", err)
	}
	s.registry = pid
	s.watching = make(chan struct{})
	go func() {
		defer close(s.watching)
		s.watchLiveness(livenessTick(opts.Reconnect), &s.probes)
	}()
	return s, nil
}

// recoverMiddleware logs an actor's panic with its stack (protoactor does
// not capture it) and lets supervision handle it.
func recoverMiddleware(log zerolog.Logger) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			defer func() {
				if r := recover(); r != nil {
					log.Error().Str("actor", c.Self().Id).Str("message_type", fmt.Sprintf("%T", env.Message)).
						Str("panic", fmt.Sprint(r)).Bytes("stack", debug.Stack()).Msg("actor panicked")
					panic(r)
				}
			}()
			next(c, env)
		}
	}
}

// ask sends msg to the registry and waits for the reply on reply.
func ask[T any](ctx context.Context, s *System, msg any, reply chan T) (T, error) {
	var zero T
	select {
	case <-s.closed:
		return zero, ErrClosed
	default:
	}
	s.actors.Root.Send(s.registry, msg)
	select {
	case v := <-reply:
		return v, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-s.closeDone:
		return zero, ErrClosed
	}
}

// SetServers makes servers the configured set: new names are started,
// missing ones shut down, changed ones reconnected, unchanged ones left
// alone. It returns as soon as the diff is applied; connects continue in
// the background (see WaitSettled).
func (s *System) SetServers(ctx context.Context, servers map[string]ServerConfig) (SetResult, error) {
	cp := make(map[string]ServerConfig, len(servers))
	for k, v := range servers {
		cp[k] = v
	}
	reply := make(chan SetResult, 1)
	return ask(ctx, s, setServers{servers: cp, reply: reply}, reply)
}

// PatchServers adds or replaces the servers in set and removes those
// named in drop, leaving every other server alone: SetServers for one
// server at a time, without a read-modify-write race between hosts. A
// name in drop that is not configured is an ErrUnknownServer in Errors.
func (s *System) PatchServers(ctx context.Context, set map[string]ServerConfig, drop []string) (SetResult, error) {
	cp := make(map[string]ServerConfig, len(set))
	for k, v := range set {
		cp[k] = v
	}
	reply := make(chan SetResult, 1)
	return ask(ctx, s, setServers{servers: cp, patch: true, drop: append([]string(nil), drop...), reply: reply}, reply)
}

// WaitSettled blocks until no server is connecting or waiting to connect
// (lazy servers excepted), or ctx ends.
func (s *System) WaitSettled(ctx context.Context) error {
	select {
	case <-s.closed:
		return ErrClosed
	default:
	}
	done := make(chan struct{})
	s.actors.Root.Send(s.registry, waitSettled{done: done})
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closeDone:
		return ErrClosed
	}
}

// Reconnect drops a server's connection (if any) and connects it again,
// through the connect scheduler. An empty name reconnects every enabled
// server.
func (s *System) Reconnect(ctx context.Context, name string) error {
	reply := make(chan error, 1)
	err, askErr := ask(ctx, s, reconnectServer{name: name, reply: reply}, reply)
	if askErr != nil {
		return askErr
	}
	return err
}

// Toggle hides a server's tools, prompts and resources from the pool and
// refuses calls to it (on=false), keeping its connection, or offers them
// again (on=true). A server disabled in its config cannot be toggled on.
func (s *System) Toggle(ctx context.Context, name string, on bool) error {
	reply := make(chan error, 1)
	err, askErr := ask(ctx, s, toggleServer{name: name, on: on, reply: reply}, reply)
	if askErr != nil {
		return askErr
	}
	return err
}

// LastSeq returns the sequence number of the latest event published, so
// that a caller can act and then see exactly the events that followed:
// Subscribe(ctx, true, LastSeq(), n) before or after acting.
func (s *System) LastSeq(ctx context.Context) (uint64, error) {
	reply := make(chan uint64, 1)
	return ask(ctx, s, seqQuery{reply: reply}, reply)
}

// AdmissionStats returns the connect scheduler's counters.
func (s *System) AdmissionStats(ctx context.Context) (AdmissionStats, error) {
	reply := make(chan AdmissionStats, 1)
	return ask(ctx, s, statsQuery{reply: reply}, reply)
}

// Subscribe returns a channel of events. With resume set, it first
// replays the remembered events after sequence number after (preceded by
// a gap event when some are no longer remembered). The channel is
// buffered (buffer events); a subscriber that falls behind loses events,
// and is told how many by a gap event. It is closed when ctx ends or the
// supervisor closes.
func (s *System) Subscribe(ctx context.Context, resume bool, after uint64, buffer int) <-chan Event {
	return SubscribeAs(s, ctx, resume, after, buffer, func(ev Event) Event { return ev })
}

// SubscribeAs is Subscribe with every event converted by convert on its
// way into the channel, so that a host-facing layer hands out its own
// event types without a goroutine and a channel hop per subscriber.
// convert runs on the registry's goroutine: it must be quick and must
// not block.
func SubscribeAs[T any](s *System, ctx context.Context, resume bool, after uint64, buffer int, convert func(Event) T) <-chan T {
	if buffer <= 0 {
		buffer = 256
	}
	ch := make(chan T, buffer)
	sub := &subscriber{
		offer: func(ev Event) bool {
			select {
			case ch <- convert(ev):
				return true
			default:
				return false
			}
		},
		end: func() { close(ch) },
	}
	s.subMu.Lock()
	defer s.subMu.Unlock()
	select {
	case <-s.closed:
		close(ch)
		return ch
	default:
	}
	s.actors.Root.Send(s.registry, subscribe{sub: sub, from: resume, after: after})
	s.unsubscribers[sub] = context.AfterFunc(ctx, func() {
		s.subMu.Lock()
		defer s.subMu.Unlock()
		if _, live := s.unsubscribers[sub]; live {
			delete(s.unsubscribers, sub)
			s.actors.Root.Send(s.registry, unsubscribe{sub: sub})
		}
	})
	return ch
}

// Tools returns the tool pool: the host's built-ins sorted by name, then
// the MCP tools sorted by qualified name.
func (s *System) Tools() []Tool {
	p := s.pool.Load()
	out := append(make([]Tool, 0, len(p.builtins)+len(p.tools)), p.builtins...)
	for _, t := range p.tools {
		out = append(out, *t)
	}
	return out
}

// ToolName returns the pool name of the tool server lists as tool: the
// name a collision gave it, else QualifiedName. ok is false when that
// name routes to a built-in or to another server's tool. It reads the
// published pool; it copies nothing.
func (s *System) ToolName(server, tool string) (name string, ok bool) {
	p := s.pool.Load()
	name = p.knownName("tool", server, tool)
	if _, builtin := p.builtinByName[name]; builtin {
		return name, false
	}
	for _, m := range []map[string]poolEntry{p.toolsByName, p.hiddenTools} {
		if e, found := m[name]; found && e.h.name != server {
			return name, false
		}
	}
	return name, true
}

// Prompts returns the prompts the servers offer (of one server, when
// server is not empty), sorted by qualified name.
func (s *System) Prompts(server string) ([]Prompt, error) {
	p := s.pool.Load()
	if server == "" {
		return append([]Prompt(nil), p.prompts...), nil
	}
	if err := s.offered(p, server); err != nil {
		return nil, err
	}
	var out []Prompt
	for _, pr := range p.prompts {
		if pr.Server == server {
			out = append(out, pr)
		}
	}
	return out, nil
}

// offered checks that a named server's lists are in pool p: configured,
// not toggled off, and ready (or recovering).
func (s *System) offered(p *pool, server string) error {
	h, err := s.handle(server)
	if err != nil {
		return err
	}
	if p.off[server] {
		return fmt.Errorf("%w: %q", ErrServerOff, server)
	}
	if v := h.view.Load(); !v.offersTools() {
		return &NotReadyError{Server: server, State: v.state, Cause: v.err}
	}
	return nil
}

// Status returns every configured server's status, sorted by name.
func (s *System) Status() []ServerStatus {
	hs := *s.handles.Load()
	out := make([]ServerStatus, 0, len(hs))
	p := s.pool.Load()
	for _, h := range hs {
		st := h.view.Load().status()
		st.ToggledOff = p.off[h.name]
		st.OfferedTools = p.offered[h.name]
		if st.State == StateReady {
			st.Strikes = int(h.strikes.Load())
		}
		st.Latency = h.latency.stats()
		out = append(out, st)
	}
	return out
}

// handle finds a configured server.
func (s *System) handle(name string) (*serverHandle, error) {
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
func onSession[T any](ctx context.Context, s *System, h *serverHandle, request func(context.Context, *session.Session) (T, error)) (T, error) {
	var zero T
	if s.pool.Load().off[h.name] {
		return zero, fmt.Errorf("%w: %q", ErrServerOff, h.name)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.callTimeout(h))
		defer cancel()
	}
	v := h.view.Load()
	if v.state != StateReady || v.sess == nil || v.sess.Err() != nil {
		var err error
		if v, err = s.awaitReady(ctx, h, nil); err != nil {
			return zero, err
		}
	}
	start := time.Now()
	res, err := request(ctx, v.sess)
	s.recordOutcome(h, v, err)
	if err != nil && errors.Is(err, transports.ErrSessionExpired) {
		// The server forgot the session and refused the request unread:
		// the server actor is initializing a new session. Wait for it and
		// send the request once more.
		nv, werr := s.awaitReady(ctx, h, v.sess)
		if werr != nil {
			return res, fmt.Errorf("%w (and no new session: %w)", err, werr)
		}
		res, err = request(ctx, nv.sess)
		s.recordOutcome(h, nv, err)
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
	return res, err
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

// callTimeout is the default deadline of a call to the server: its
// timeoutMs, else Options.CallTimeout.
func (s *System) callTimeout(h *serverHandle) time.Duration {
	if ms := h.view.Load().cfg.TimeoutMs; ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return s.opts.CallTimeout
}

// recordOutcome counts a request's outcome on connection v: a transient
// transport error is a strike, an answer clears the strikes.
func (s *System) recordOutcome(h *serverHandle, v *serverView, err error) {
	strike, ok := strikes(err)
	if !ok || h.view.Load().sess != v.sess {
		return // says nothing, or about a connection already replaced
	}
	if strike {
		h.strike(s.actors.Root, v.gen, v.strikeLimit, err)
	} else if h.strikes.Load() != 0 {
		h.strikes.Store(0)
	}
}

// awaitReady returns the server's view once it is ready with a session
// other than old. A server connecting or reconnecting is waited for, up to
// ctx's end (unless Options.FailFast; a session being renewed after
// expiry is always waited for). A parked server is woken, and the call
// waits for that one fresh attempt. Disabled, stopped and held servers
// fail at once.
func (s *System) awaitReady(ctx context.Context, h *serverHandle, old *session.Session) (*serverView, error) {
	woken, wokenAt := false, uint64(0)
	for {
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
			if woken && v.gen > wokenAt {
				return nil, &NotReadyError{Server: h.name, State: v.state, Cause: v.err} // the fresh attempt failed
			}
			if s.opts.FailFast {
				return nil, &NotReadyError{Server: h.name, State: v.state, Cause: v.err}
			}
			if !woken {
				woken, wokenAt = true, v.gen
				s.actors.Root.Send(s.registry, wakeServer{name: h.name, handle: h})
			}
		case s.opts.FailFast && !v.renewing():
			return nil, &NotReadyError{Server: h.name, State: v.state, Cause: v.err}
		case v.state == StatePending && v.cfg.Lazy && !woken:
			// A lazy server connects on first use.
			woken, wokenAt = true, v.gen
			s.actors.Root.Send(s.registry, wakeServer{name: h.name, handle: h})
		}
		select {
		case <-changed:
		case <-ctx.Done():
			v := h.view.Load()
			return nil, &NotReadyError{Server: h.name, State: v.state, Cause: v.err, Waited: context.Cause(ctx)}
		}
	}
}

// CallTool calls a tool of the pool by its qualified name. The call goes
// straight to the server's session: no actor mailbox is involved. A tool
// that failed is a result with IsError set; an error means the call did
// not complete (unknown tool, server not ready, connection lost, timeout,
// or a JSON-RPC error from the server). A call whose connection was lost
// is sent again only when Options.ReplayIdempotent allows it for this
// tool (see poolEntry.replayable).
func (s *System) CallTool(ctx context.Context, name string, args json.RawMessage) (*protocol.CallToolResult, error) {
	return s.callTool(ctx, name, args, RequestOptions{})
}

// callTool is CallTool with the request's options.
func (s *System) callTool(ctx context.Context, name string, args json.RawMessage, o RequestOptions) (*protocol.CallToolResult, error) {
	p := s.pool.Load()
	if b, ok := p.builtinByName[name]; ok {
		if b.Call == nil {
			return nil, fmt.Errorf("%w: %q", ErrHostTool, name)
		}
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.opts.CallTimeout)
			defer cancel()
		}
		return b.Call(ctx, args)
	}
	e, err := s.route(ctx, name, func(p *pool) (poolEntry, bool) {
		if e, ok := p.toolsByName[name]; ok {
			return e, true
		}
		// A parked server's tools are out of the pool, but a call by name
		// wakes the server.
		e, ok := p.hiddenTools[name]
		return e, ok
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %q", err, name)
	}
	call := func(ctx context.Context, sess *session.Session) (*protocol.CallToolResult, error) {
		return sess.CallToolWith(ctx, e.name, args, o.session())
	}
	if !s.opts.ReplayIdempotent || !e.replayable {
		return onSession(ctx, s, e.h, call)
	}
	if _, ok := ctx.Deadline(); !ok {
		// One deadline for the call and its replay.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.callTimeout(e.h))
		defer cancel()
	}
	res, err := onSession(ctx, s, e.h, call)
	var lost *ConnectionLostError
	if errors.As(err, &lost) {
		s.log.Info().Str("server", e.h.name).Str("tool", e.name).Msg("replaying a read-only, idempotent call after its connection was lost")
		return onSession(ctx, s, e.h, call)
	}
	return res, err
}

// route finds the pool entry of a qualified name with find. A name no
// entry has may belong to a lazy server not yet connected (its tools are
// unknown until then): the name's mcp__<server>__ prefix wakes it, and
// the name is looked up again once it is ready. It may also belong to a
// server that has just become ready: its status says so a moment before
// the registry folds its lists into the pool (rebuilds are spaced), and
// the name is looked up again once the pool has them.
func (s *System) route(ctx context.Context, name string, find func(*pool) (poolEntry, bool)) (poolEntry, error) {
	p := s.pool.Load()
	if e, ok := find(p); ok {
		return e, nil
	}
	if server, ok := p.offRoutes[name]; ok {
		return poolEntry{}, fmt.Errorf("%w (server %q)", ErrServerOff, server)
	}
	h := s.lazyServerOf(name)
	if h == nil {
		h = s.unfoldedServerOf(name)
	}
	if h == nil {
		return poolEntry{}, ErrUnknownTool
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.callTimeout(h))
		defer cancel()
	}
	if _, err := s.awaitReady(ctx, h, nil); err != nil {
		return poolEntry{}, err
	}
	// The registry folds the new lists into the pool just after the
	// server's ready view: wait for it.
	for {
		changed := s.poolChanged.next()
		if e, ok := find(s.pool.Load()); ok {
			return e, nil
		}
		if v := h.view.Load(); v.state == StateReady && s.poolHas(h) {
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
func (s *System) lazyServerOf(name string) *serverHandle {
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
func (s *System) unfoldedServerOf(name string) *serverHandle {
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

// PoolReflects reports whether the tool pool reflects server name's
// current state: a server's status says it is ready a moment before the
// registry folds its lists into the pool (rebuilds are spaced).
func (s *System) PoolReflects(name string) bool {
	h, err := s.handle(name)
	return err == nil && s.poolHas(h)
}

// poolHas reports whether the pool reflects server h's current view.
func (s *System) poolHas(h *serverHandle) bool {
	return s.pool.Load().views[h] == h.view.Load()
}

// Resources lists the resources and resource templates the servers offer
// (of one server, when server is not empty), sorted by server, then URI.
func (s *System) Resources(server string) ([]Resource, []ResourceTemplate, error) {
	p := s.pool.Load()
	if server == "" {
		return append([]Resource(nil), p.resources...), append([]ResourceTemplate(nil), p.templates...), nil
	}
	if err := s.offered(p, server); err != nil {
		return nil, nil, err
	}
	var rs []Resource
	var ts []ResourceTemplate
	for _, r := range p.resources {
		if r.Server == server {
			rs = append(rs, r)
		}
	}
	for _, t := range p.templates {
		if t.Server == server {
			ts = append(ts, t)
		}
	}
	return rs, ts, nil
}

// ReadResource reads a resource from a server.
func (s *System) ReadResource(ctx context.Context, server, uri string) (*protocol.ReadResourceResult, error) {
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (*protocol.ReadResourceResult, error) {
		return sess.ReadResource(ctx, uri)
	})
}

// GetPrompt renders a prompt, named by its qualified name.
func (s *System) GetPrompt(ctx context.Context, name string, args map[string]string) (*protocol.GetPromptResult, error) {
	e, err := s.route(ctx, name, func(p *pool) (poolEntry, bool) {
		e, ok := p.promptsByName[name]
		return e, ok
	})
	if errors.Is(err, ErrUnknownTool) {
		err = ErrUnknownPrompt
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %q", err, name)
	}
	return onSession(ctx, s, e.h, func(ctx context.Context, sess *session.Session) (*protocol.GetPromptResult, error) {
		return sess.GetPrompt(ctx, e.name, args)
	})
}

// Ping checks that a ready server answers.
func (s *System) Ping(ctx context.Context, server string) error {
	h, err := s.handle(server)
	if err != nil {
		return err
	}
	_, err = onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (struct{}, error) {
		return struct{}{}, sess.Ping(ctx)
	})
	return err
}

// Session returns a ready server's live session, for requests the API
// does not wrap. It is valid until the connection ends.
func (s *System) Session(server string) (*session.Session, error) {
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

// Close shuts every server down (the full shutdown ladder, concurrently)
// and stops the actor system. It returns when everything is gone or ctx
// ends; in the second case the error names the servers still stopping.
// Close is idempotent.
func (s *System) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.subMu.Lock()
		close(s.closed)
		for sub, stop := range s.unsubscribers {
			stop()
			delete(s.unsubscribers, sub)
		}
		s.subMu.Unlock()
		done := make(chan struct{})
		s.actors.Root.Send(s.registry, closeAll{done: done})
		go func() {
			s.opts.host.close() // pollers and channel inboxes first
			<-done
			<-s.watching // the watcher ends with closed; its probes with the sessions
			s.probes.Wait()
			s.actors.Root.StopFuture(s.registry).Wait()
			s.actors.Shutdown()
			s.opts.dispatch.stop()
			s.opts.sharedHTTP.CloseIdleConnections()
			s.releaseHelper() // the last hold stops it, and what is left below it
			close(s.closeDone)
		}()
	})
	select {
	case <-s.closeDone:
		return s.closeErr
	case <-ctx.Done():
		var stopping []string
		for _, h := range *s.handles.Load() {
			if v := h.view.Load(); v.state != StateStopped {
				stopping = append(stopping, h.name)
			}
		}
		return fmt.Errorf("mcpvisor: close: servers still stopping %v: %w", stopping, ctx.Err())
	}
}
