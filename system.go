package mcpvisor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/oauth"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/internal/routine"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/httpclient"
	"github.com/mcpvisor/mcpvisor/transports/stdio/reaper"
	"github.com/mcpvisor/mcpvisor/transports/streamable"
)

// Errors of the supervisor. Test with errors.Is; a server's own JSON-RPC
// error is a *protocol.Error (errors.As).
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
	// ErrRootsNotDeclared: Roots().Set needs the roots capability, declared
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

// Supervisor keeps a set of MCP servers connected: an actor system with
// one registry actor and one server actor per configured server.
//
// Its own methods work on the whole set and the tool pool; one server's
// operations are on its handle, Server(name), and each MCP feature's on
// its own: Resources, Prompts, Skills, Tasks, Roots, Polling, Channels.
// Its parts are in its fields: the line to the registry (reg), the
// principals' sessions, the liveness watcher, the call permissions.
//
// Concurrency: every method (and every handle's) may be called from any
// goroutine at any time, Close included. Calls (CallTool and friends) go
// straight to the server's live session and wait on no actor; changes
// (SetServers, Connect, a server's Disconnect, Toggle and Reconnect,
// Subscribe, Close) are messages to the registry actor, applied one at a
// time in the order they arrive.
// Status, Tools and the lists read snapshots the actors publish
// atomically (pool, handles, views): each is consistent in itself, and
// two of them may straddle a change.
type Supervisor struct {
	opts   runOptions
	log    zerolog.Logger
	system *actor.ActorSystem

	// reg is the line to the registry actor: asks and subscriptions.
	reg registryLink
	// published holds the pool and the handles: written by the registry
	// alone, read by every method without a mailbox hop.
	published

	// permissions decide whether a call may go ahead (permissions.go).
	permissions callPermissions

	// search is the tool search index over the pool (search.go), with
	// its own locks.
	search toolSearch

	// liveness is the liveness watcher (liveness.go), started by Start.
	liveness *livenessWatcher

	closed    chan struct{} // closed when Close starts
	closeOnce sync.Once
	closeErr  error
	closeDone chan struct{}

	// releaseHelper lets the process helper (package reaper) stop once
	// the supervisor is closed and its servers are gone.
	releaseHelper func()

	// events builds the typed events of every subscription: touched only
	// on the registry's goroutine (subscribeAs).
	events eventConverter

	// principals opens the principals' own sessions of per-user and
	// exchange servers and keeps their pending authorizations
	// (usersessions.go, userauth.go).
	principals principals
}

// published is what the registry publishes for callers to read, and the
// lookups over it (a server's handle, the server a name belongs to, a
// status with what the pool records of it).
//
// Concurrency: the registry actor is the only writer of every field
// (after Start stored the first values); any goroutine reads them.
type published struct {
	pool atomic.Pointer[pool]
	// poolChanged fires after every new pool (for calls waiting for a lazy
	// server's tools).
	poolChanged changeSignal
	handles     atomic.Pointer[[]*serverHandle] // sorted by name
}

// Start starts a Supervisor with no servers; give it some with
// SetServers. ctx is not retained.
func Start(ctx context.Context, opts Options) (*Supervisor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ro := runOptions{Options: opts.withDefaults()}
	if err := ro.validate(); err != nil {
		return nil, err
	}
	shared, err := httpclient.New(transports.Config{}, httpclient.Options{Unlimited: true})
	if err != nil {
		return nil, err
	}
	ro.sharedHTTP = shared
	ro.userStore = ro.OAuth.Store
	if ro.userStore == nil {
		ro.userStore = &oauth.MemoryStore{}
	}
	ro.sessionEnds = streamable.NewEndLimiter(0)
	ro.admission = newAdmissionGate(ro.LocalConnectLimit, ro.RemoteConnectLimit)
	ro.host = newHostState(ro)
	ro.tracer = newTracer(ro.TracerProvider)
	ro.dispatch = actors.NewDispatcher()
	s := &Supervisor{
		opts:      ro,
		log:       ro.Logger,
		closed:    make(chan struct{}),
		closeDone: make(chan struct{}),
		// The helper, once started, outlives the restarts of servers.
		releaseHelper: reaper.Hold(),
	}
	first, _ := nextPool(nil, ro.Builtins, ro.MaxDescriptionLength, nil)
	s.pool.Store(first)
	s.permissions.rules.Store(newPermissionSet(ro.Permissions))
	s.permissions.approve = ro.ApproveCall
	s.principals.s = s
	s.handles.Store(&[]*serverHandle{})
	s.system = actors.NewSystem(ro.Logger)
	deps := registryDeps{opts: s.opts, log: s.log, out: &s.published}
	props := actors.RegistryProps(func() actor.Actor { return newRegistry(deps) }, ro.Logger, ro.dispatch)
	pid, err := s.system.Root.SpawnNamed(props, "registry")
	if err != nil {
		s.system.Shutdown()
		s.opts.dispatch.Stop()
		s.releaseHelper()
		return nil, fmt.Errorf("mcpvisor: starting the registry: %w", err)
	}
	s.reg = registryLink{root: s.system.Root, pid: pid, closed: s.closed, closeDone: s.closeDone, unsubscribers: map[*subscriber]func() bool{}}
	s.liveness = &livenessWatcher{handles: &s.handles, closed: s.closed, root: s.system.Root, log: s.log, done: make(chan struct{})}
	routine.Go("supervisor.liveness", func() { s.liveness.run(livenessTick(ro.Reconnect)) })
	return s, nil
}

// registryLink is a Supervisor's line to its registry actor: asks (a
// message carrying its reply channel) and the subscriptions to the
// registry's event bus.
//
// Concurrency: root, pid, closed and closeDone are set by Start and not
// written after; subMu guards unsubscribers, and Close closes closed
// under it, so that no subscription starts after Close stopped the
// others.
type registryLink struct {
	root      *actor.RootContext
	pid       *actor.PID
	closed    chan struct{} // the Supervisor's: closed when Close starts
	closeDone chan struct{} // the Supervisor's: closed when Close is done

	subMu sync.Mutex
	// unsubscribers holds the context.AfterFunc registrations of live
	// subscriptions, stopped on Close so none fires at a stopped registry.
	unsubscribers map[*subscriber]func() bool // guarded by subMu
}

// send sends msg to the registry, without waiting.
func (r *registryLink) send(msg any) { r.root.Send(r.pid, msg) }

// close closes r.closed and stops every subscription's unsubscriber.
func (r *registryLink) close() {
	r.subMu.Lock()
	defer r.subMu.Unlock()
	close(r.closed)
	for sub, stop := range r.unsubscribers {
		stop()
		delete(r.unsubscribers, sub)
	}
}

// ask sends msg to the registry and waits for the reply on reply.
func ask[T any](ctx context.Context, r *registryLink, msg any, reply chan T) (T, error) {
	var zero T
	select {
	case <-r.closed:
		return zero, ErrClosed
	default:
	}
	r.send(msg)
	select {
	case v := <-reply:
		return v, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-r.closeDone:
		return zero, ErrClosed
	}
}

// SetServers makes servers the configured set: new names are started,
// missing ones shut down, changed ones reconnected, unchanged ones left
// alone. It returns as soon as the diff is applied; connects continue in
// the background (see WaitSettled).
func (r *registryLink) setServers(ctx context.Context, servers map[string]ServerConfig) (SetResult, error) {
	cp := make(map[string]ServerConfig, len(servers))
	for k, v := range servers {
		cp[k] = v
	}
	reply := make(chan SetResult, 1)
	return ask(ctx, r, setServers{servers: cp, reply: reply}, reply)
}

// PatchServers adds or replaces the servers in set and removes those
// named in drop, leaving every other server alone: SetServers for some
// servers, without a read-modify-write race between hosts (Connect,
// Disconnect and a cluster member's placement use it). A name in drop
// that is not configured is an ErrUnknownServer in Errors. It returns
// once the change is applied; connects continue in the background.
func (s *Supervisor) PatchServers(ctx context.Context, set map[string]ServerConfig, drop []string) (SetResult, error) {
	cp := make(map[string]ServerConfig, len(set))
	for k, v := range set {
		cp[k] = v
	}
	reply := make(chan SetResult, 1)
	return ask(ctx, &s.reg, setServers{servers: cp, patch: true, drop: append([]string(nil), drop...), reply: reply}, reply)
}

// WaitSettled blocks until every server has reached a state that waits
// for nothing (ready, failed, disabled; lazy servers excepted), or ctx
// ends.
func (s *Supervisor) WaitSettled(ctx context.Context) error {
	select {
	case <-s.closed:
		return ErrClosed
	default:
	}
	done := make(chan struct{})
	s.reg.send(waitSettled{done: done})
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
func (r *registryLink) reconnect(ctx context.Context, name string) error {
	reply := make(chan error, 1)
	err, askErr := ask(ctx, r, reconnectServer{name: name, reply: reply}, reply)
	if askErr != nil {
		return askErr
	}
	return err
}

// LastSeq returns the sequence number of the latest event, so that a host
// can act and then see exactly the events that followed:
//
//	seq, _ := sup.LastSeq(ctx)
//	sup.CallTool(ctx, "mcp__srv__announce", args)
//	events := sup.Subscribe(ctx, mcpvisor.FromSequence(seq))
func (s *Supervisor) LastSeq(ctx context.Context) (uint64, error) {
	reply := make(chan uint64, 1)
	return ask(ctx, &s.reg, seqQuery{reply: reply}, reply)
}

// AdmissionStats returns the connect scheduler's counters.
func (r *registryLink) admissionStats(ctx context.Context) (admissionStats, error) {
	reply := make(chan admissionStats, 1)
	return ask(ctx, r, statsQuery{reply: reply}, reply)
}

// Subscribe returns a channel of events. With resume set, it first
// replays the remembered events after sequence number after (preceded by
// a gap event when some are no longer remembered). The channel is
// buffered (buffer events); a subscriber that falls behind loses events,
// and is told how many by a gap event. It is closed when ctx ends or the
// supervisor closes.
func (r *registryLink) subscribeRecords(ctx context.Context, resume bool, after uint64, buffer int) <-chan eventRecord {
	return subscribeAs(r, ctx, resume, after, buffer, func(ev eventRecord) eventRecord { return ev })
}

// subscribeAs is Subscribe with every event converted by convert on its
// way into the channel, so that a host-facing layer hands out its own
// event types without a goroutine and a channel hop per subscriber.
// convert runs on the registry's goroutine: it must be quick and must
// not block.
func subscribeAs[T any](r *registryLink, ctx context.Context, resume bool, after uint64, buffer int, convert func(eventRecord) T) <-chan T {
	if buffer <= 0 {
		buffer = 256
	}
	ch := make(chan T, buffer)
	sub := &subscriber{
		offer: func(ev eventRecord) bool {
			select {
			case ch <- convert(ev):
				return true
			default:
				return false
			}
		},
		end: func() { close(ch) },
	}
	r.subMu.Lock()
	defer r.subMu.Unlock()
	select {
	case <-r.closed:
		close(ch)
		return ch
	default:
	}
	r.send(subscribe{sub: sub, from: resume, after: after})
	r.unsubscribers[sub] = context.AfterFunc(ctx, func() {
		r.subMu.Lock()
		defer r.subMu.Unlock()
		if _, live := r.unsubscribers[sub]; live {
			delete(r.unsubscribers, sub)
			r.send(unsubscribe{sub: sub})
		}
	})
	return ch
}

// Close shuts every server down (stdio servers with the full ladder:
// close stdin, SIGTERM, SIGKILL to the process group) and stops the
// supervisor. In-flight calls fail with ErrConnectionClosed. It returns
// when everything is gone or ctx ends, naming the servers still stopping
// in the second case. Close is idempotent.
func (s *Supervisor) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.reg.close()
		done := make(chan struct{})
		s.reg.send(closeAll{done: done})
		routine.Go("supervisor.close", func() {
			s.opts.host.close()        // pollers and channel inboxes first
			s.principals.flows.close() // principals' pending authorizations
			<-done
			<-s.liveness.done // the watcher ends with closed; its probes with the sessions
			s.liveness.probes.Wait()
			s.system.Root.StopFuture(s.reg.pid).Wait()
			s.system.Shutdown()
			s.opts.dispatch.Stop()
			s.opts.sharedHTTP.CloseIdleConnections()
			s.releaseHelper() // the last hold stops it, and what is left below it
			close(s.closeDone)
		})
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
