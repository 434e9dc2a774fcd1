package mcpvisor

import (
	"fmt"
	"github.com/mcpvisor/mcpvisor/actors"
	"reflect"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/actors/admission"
	"github.com/mcpvisor/mcpvisor/internal/routine"
)

// serverEntry is the registry's record of one configured server.
type serverEntry struct {
	cfg   ServerConfig
	h     *serverHandle
	class admission.Class
	view  *serverView // the latest view the registry processed
	dead  bool        // its actor was stopped by supervision (crash loop)
	off   bool        // toggled off by the host: out of the pool, calls refused
	// unconfirmed is set from sending the actor a changed config until a
	// view carrying it arrives: until then e.view describes the old one.
	unconfirmed bool
	// used is set once a lazy server was first used (or reconnected): from
	// then on it is supervised like any other, reconnects included.
	used bool
}

// eager reports whether the server connects without waiting for a call:
// enabled, and not lazy or already used.
func (e *serverEntry) eager() bool {
	return e.cfg.startable() && (!e.cfg.Lazy || e.used)
}

// registryDeps is what the registry takes from its Supervisor: the options,
// the logger, and where it publishes the pool and the handles. Nothing
// else of the Supervisor is the registry's.
type registryDeps struct {
	opts runOptions // read-only
	log  zerolog.Logger
	out  *published // the registry is its only writer
}

// registry owns the set of server actors (its children), admits their
// connects, builds the tool pool and runs the event bus.
//
// Concurrency: every field is touched only by Receive (the actor's
// goroutine); timers and the goroutines it starts only send it messages.
// What callers read (the pool, the handles) it publishes through out.
type registry struct {
	opts runOptions
	log  zerolog.Logger
	out  *published

	root *actor.RootContext // set at Started: to message actors from timers and goroutines
	self *actor.PID         // set at Started

	servers  map[string]*serverEntry        // configured servers by name
	removing map[*serverHandle]*serverEntry // removed servers still shutting down
	// actorOf finds a server by its actor's PID (its Id), for the
	// Terminated notices: one lookup, not a walk of every server (closing
	// 10,000 servers walked them 10,000 times). Entries live from the
	// spawn until the actor's end is handled.
	actorOf  map[string]*serverHandle
	childSeq int // makes child actor names unique

	admission *admissionGate // who may connect next; shared with the connect goroutines (opts.admission)

	// The pool is rebuilt once per burst of changes: a change marks it
	// dirty and queues a flushPool message, and the flush stores the new
	// pool before publishing the events waiting for it (so a subscriber
	// told of a change sees the pool that goes with it).
	poolDirty   bool
	flushQueued bool
	flushTimer  *time.Timer // set while a flush waits for flushSpacing
	lastFlush   time.Time
	lastBuild   time.Duration // how long the last pool rebuild took
	pending     []eventRecord // events to publish at the next flush

	bus           *bus
	gapTimer      *time.Timer // set while a gap flush is scheduled
	settleWaiters []chan struct{}
	closing       bool
	closed        bool // every server is gone and the bus is closed
	closeWaiters  []chan struct{}
}

func newRegistry(deps registryDeps) *registry {
	r := &registry{
		opts:      deps.opts,
		log:       deps.log,
		out:       deps.out,
		servers:   map[string]*serverEntry{},
		removing:  map[*serverHandle]*serverEntry{},
		actorOf:   map[string]*serverHandle{},
		admission: deps.opts.admission,
		bus:       newBus(deps.opts.EventBuffer),
	}
	return r
}

// Receive is the registry's message loop.
func (r *registry) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.root, r.self = ctx.ActorSystem().Root, ctx.Self()
		r.admission.mu.Lock()
		r.admission.root = r.root
		r.admission.mu.Unlock()
	case setServers:
		m.reply <- r.setServers(ctx, m.servers, m.patch, m.drop)
	case serverChanged:
		r.serverChanged(m)
	case reconnectServer:
		m.reply <- r.reconnect(ctx, m.name)
	case wakeServer:
		r.wake(ctx, m)
	case toggleServer:
		m.reply <- r.toggle(m.name, m.on)
	case seqQuery:
		m.reply <- r.bus.seq
	case flushPool:
		r.flush()
	case serverEvent:
		if e, ok := r.servers[m.handle.name]; ok && e.h == m.handle {
			ev := m.event
			ev.Server = m.handle.name
			if r.flushQueued {
				// After the state and pool events already waiting, so
				// that the stream keeps the order things happened in.
				r.pending = append(r.pending, ev)
			} else {
				r.publish(ev)
			}
		}
	case subscribe:
		if r.closing {
			m.sub.end()
			return
		}
		r.bus.add(m.sub, m.from, m.after)
	case unsubscribe:
		r.bus.remove(m.sub)
	case waitSettled:
		r.settleWaiters = append(r.settleWaiters, m.done)
		r.checkSettled()
	case closeAll:
		r.closeAll(ctx, m.done)
	case statsQuery:
		m.reply <- r.stats()
	case flushGaps:
		r.gapTimer = nil
		r.scheduleGapFlush(r.bus.flushGaps())
	case *actor.Terminated:
		r.terminated(m.Who)
	case serverGone:
		r.stopped(m.handle)
	}
}

// setServers applies a desired configuration as a diff. A patch touches
// only the servers named in desired (added or replaced) and in drop
// (removed; a name not configured is an ErrUnknownServer in Errors);
// otherwise desired is the whole set and every other server is removed.
func (r *registry) setServers(ctx actor.Context, desired map[string]ServerConfig, patch bool, drop []string) SetResult {
	res := SetResult{Errors: map[string]error{}}
	if r.closing {
		for name := range desired {
			res.Errors[name] = ErrClosed
		}
		for _, name := range drop {
			res.Errors[name] = ErrClosed
		}
		return res
	}
	for _, name := range drop {
		if e, ok := r.servers[name]; ok {
			r.remove(ctx, name, e)
			res.Removed = append(res.Removed, name)
		} else {
			res.Errors[name] = fmt.Errorf("%w: %q", ErrUnknownServer, name)
		}
	}
	for name, e := range r.servers {
		if _, keep := desired[name]; !keep && !patch {
			r.remove(ctx, name, e)
			res.Removed = append(res.Removed, name)
		}
	}
	for name, cfg := range desired {
		if name == "" {
			res.Errors[name] = fmt.Errorf("a server needs a name")
			continue
		}
		if err := cfg.Validate(); err != nil {
			res.Errors[name] = err
			if _, running := r.servers[name]; running {
				r.log.Warn().Str("server", name).Err(err).Msg("rejected a config change; the running server keeps its old config")
			}
			continue
		}
		e, ok := r.servers[name]
		switch {
		case !ok:
			r.add(ctx, name, cfg)
			res.Added = append(res.Added, name)
		case sameConfig(e.cfg, cfg) && !e.dead:
			res.Unchanged = append(res.Unchanged, name)
		case e.dead:
			r.respawn(ctx, name, e, cfg)
			res.Changed = append(res.Changed, name)
			res.Reconnected = append(res.Reconnected, name)
		default:
			if r.change(name, e, cfg) {
				res.Reconnected = append(res.Reconnected, name)
			}
			res.Changed = append(res.Changed, name)
		}
	}
	for _, l := range [][]string{res.Added, res.Removed, res.Changed, res.Reconnected, res.Unchanged} {
		sort.Strings(l)
	}
	r.publishHandles()
	if r.poolDirty {
		r.flush() // before the reply: removed servers' tools are gone when SetServers returns
	}
	r.pump()
	r.checkSettled()
	return res
}

// affectsConnection reports whether changing a server's config from a to
// b needs a new connection: anything but how the pool and calls use the
// server (trust, tool filter, call timeout, laziness, reconnect policy,
// scope).
func affectsConnection(a, b ServerConfig) bool {
	if (a.Trust == TrustSandbox) != (b.Trust == TrustSandbox) {
		return true // the process must start confined, or unconfined
	}
	a.Trust, a.Tools, a.TimeoutMs, a.Lazy, a.Reconnect, a.Scope = b.Trust, b.Tools, b.TimeoutMs, b.Lazy, b.Reconnect, b.Scope
	return !sameConfig(a, b)
}

// sameConfig reports whether a and b configure the same server. Nodes is
// not compared: it places a server in a cluster, and a single supervisor
// ignores it (ServerConfig.Nodes).
func sameConfig(a, b ServerConfig) bool {
	a.Nodes = b.Nodes
	return reflect.DeepEqual(a, b)
}

func (r *registry) add(ctx actor.Context, name string, cfg ServerConfig) {
	h := &serverHandle{name: name}
	held := heldError(cfg) // nil unless the server waits for approval
	h.view.Store(&serverView{name: name, cfg: cfg, state: initialState(cfg), err: held, failure: ClassifyFailure(held), since: time.Now()})
	// The producer captures no copy of the options or the config (an
	// idle server costs their size for as long as it exists): the
	// registry's options never change, and the actor takes its config
	// from the handle's view (a restarted one, the latest).
	opts := &r.opts
	props := actors.ChildProps(func() actor.Actor { return newServerActor(h, h.view.Load().cfg, opts) }, r.log, opts.dispatch)
	r.childSeq++
	pid, err := ctx.SpawnNamed(props, fmt.Sprintf("server-%d", r.childSeq))
	if err != nil { // cannot happen: child names are unique
		panic(fmt.Sprintf("spawning server actor %q: %v", name, err))
	}
	h.pid = pid
	r.actorOf[pid.Id] = h
	e := &serverEntry{cfg: cfg, h: h, class: classOf(cfg)}
	r.servers[name] = e
	if e.eager() {
		r.enqueue(name, e)
	}
}

// respawn replaces a server whose actor supervision stopped (a crash
// loop) with a fresh actor; what the dead one left running finishes on
// its own.
func (r *registry) respawn(ctx actor.Context, name string, e *serverEntry, cfg ServerConfig) {
	r.dequeue(name)
	delete(r.servers, name)
	r.add(ctx, name, cfg)
}

func initialState(cfg ServerConfig) State {
	switch {
	case cfg.Disabled:
		return StateDisabled
	case cfg.held():
		return StateNeedsApproval
	}
	return StatePending
}

// change applies a server's changed config, and reports whether its
// connection is replaced.
func (r *registry) change(name string, e *serverEntry, cfg ServerConfig) bool {
	if !affectsConnection(e.cfg, cfg) {
		wasLazy := e.cfg.Lazy
		e.cfg, e.unconfirmed = cfg, true
		r.root.Send(e.h.pid, retune{cfg: cfg})
		if wasLazy && !cfg.Lazy && cfg.startable() && e.h.view.Load().state == StatePending {
			r.enqueue(name, e) // no longer waits for first use
		}
		return false
	}
	r.dequeue(name)
	e.cfg, e.class, e.unconfirmed, e.used = cfg, classOf(cfg), true, false
	r.root.Send(e.h.pid, reconfigure{cfg: cfg})
	if e.eager() {
		r.enqueue(name, e)
	}
	return true
}

func (r *registry) remove(ctx actor.Context, name string, e *serverEntry) {
	r.dequeue(name)
	delete(r.servers, name)
	r.removing[e.h] = e
	r.markPoolDirty() // its tools leave the pool now, not when it has stopped
	if e.dead {
		// No actor to shut it down: wait for the goroutines it left (a
		// session close, a connect attempt) to finish with their processes.
		h, root, self := e.h, r.root, r.self
		routine.Go("registry.await-dead-server", func() {
			h.running.Wait()
			root.Send(self, serverGone{handle: h})
		}, "server", name)
		return
	}
	ctx.Send(e.h.pid, shutdown{done: make(chan struct{})})
}

// serverGone reports that a removed server whose actor was already dead
// has no goroutine left.
type serverGone struct {
	handle *serverHandle
}

// serverChanged processes a server's new view: admission bookkeeping,
// state events, and the tool pool.
func (r *registry) serverChanged(m serverChanged) {
	v := m.view
	e, ok := r.servers[m.name]
	if !ok || e.h != m.handle {
		if v.state == StateStopped {
			r.stopped(m.handle)
		}
		return
	}
	prev := e.view
	e.view = v
	if e.unconfirmed && sameConfig(v.cfg, e.cfg) {
		e.unconfirmed = false
	}
	if v.state != StateConnecting {
		r.admission.settled(m.name, v.admitted)
	}
	if v.state == StatePending && e.eager() && v.admitted == e.h.admitted.Load() {
		// A server back in pending (its actor restarted after a crash, or
		// its config changed) waits for a slot again. Idempotent: a server
		// already queued or admitted is left where it is. A pending view
		// older than the server's last admission is not: the actor's
		// first view, published when it started, can reach the registry
		// only after the connect SetServers queued was admitted, ran and
		// freed its slot, and queueing it then connected the server a
		// second time.
		r.enqueue(m.name, e)
	}
	var prevState State // empty for a server's first event
	if prev != nil {
		prevState = prev.state
	}
	if poolChanged(prev, v) || hiddenChanged(prev, v) {
		r.markPoolDirty()
	}
	if prev == nil || prev.state != v.state {
		r.queueState(v, prevState, v.err)
	}
	r.pump()
	r.endOfWave()
	r.checkSettled()
}

// toggle hides (on=false) or shows again a server's tools, prompts and
// resources; its connection is kept either way.
func (r *registry) toggle(name string, on bool) error {
	if r.closing {
		return ErrClosed
	}
	e, ok := r.servers[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownServer, name)
	}
	if on && e.cfg.Disabled {
		return fmt.Errorf("mcpvisor: server %q is disabled in its config (disabled: true); toggling cannot start it", name)
	}
	if on && e.cfg.held() {
		return fmt.Errorf("%w: %q: toggling cannot start it", ErrNeedsApproval, name)
	}
	if e.off == !on {
		return nil
	}
	e.off = !on
	r.pending = append(r.pending, eventRecord{Type: EventServerToggled, Server: name, ToggledOff: e.off})
	r.poolDirty = true
	r.flush() // before the reply: once Toggle returns, the pool says so
	return nil
}

// reconnect re-admits one server (or every enabled one).
func (r *registry) reconnect(ctx actor.Context, name string) error {
	if r.closing {
		return ErrClosed
	}
	names := []string{name}
	if name == "" {
		names = names[:0]
		for n, e := range r.servers {
			if e.cfg.startable() {
				names = append(names, n)
			}
		}
	}
	for _, n := range names {
		e, ok := r.servers[n]
		if !ok {
			return fmt.Errorf("%w: %q", ErrUnknownServer, n)
		}
		if e.cfg.Disabled {
			return fmt.Errorf("server %q is disabled in its config", n)
		}
		if e.cfg.held() {
			return fmt.Errorf("%w: %q: %s", ErrNeedsApproval, n, e.cfg.NeedsApproval)
		}
		if e.dead {
			r.respawn(ctx, n, e, e.cfg)
			continue
		}
		ctx.Send(e.h.pid, resetEpisode{})
		e.used = true
		r.enqueue(n, e)
	}
	r.publishHandles()
	r.pump()
	return nil
}

// wake admits a parked server for one attempt (or a lazy one for its
// first), for a call waiting on it.
func (r *registry) wake(ctx actor.Context, m wakeServer) {
	e, ok := r.servers[m.name]
	if r.closing || !ok || e.h != m.handle || !e.cfg.startable() {
		return
	}
	if e.dead {
		r.respawn(ctx, m.name, e, e.cfg)
		e = r.servers[m.name]
		e.used = true
		r.enqueue(m.name, e)
		r.publishHandles()
		r.pump()
		return
	}
	e.used = true
	if v := e.h.view.Load(); v.state.Parked() || v.state == StatePending {
		r.enqueue(m.name, e)
		r.pump()
	}
}

// checkSettled wakes the WaitSettled callers once no server is pending
// (other than lazy ones) or connecting.
func (r *registry) checkSettled() {
	if len(r.settleWaiters) == 0 || r.flushQueued {
		return // a queued flush checks again once the pool is up to date
	}
	for name, e := range r.servers {
		// e.view, not the handle's latest: settled means the registry has
		// also folded the server's state into the pool. A server queued or
		// admitted for a connect, or not yet past a config change, is not
		// settled whatever its view says.
		v := e.view
		if v == nil || e.unconfirmed || r.admission.waiting(name) || v.state == StateConnecting || v.loadingCache ||
			(v.state == StatePending && e.eager()) {
			return
		}
	}
	for _, done := range r.settleWaiters {
		close(done)
	}
	r.settleWaiters = nil
}

// closeAll shuts every server down.
func (r *registry) closeAll(ctx actor.Context, done chan struct{}) {
	r.closing = true
	r.closeWaiters = append(r.closeWaiters, done)
	for name, e := range r.servers {
		r.remove(ctx, name, e)
	}
	r.maybeClosed()
}

func (r *registry) maybeClosed() {
	if !r.closing || len(r.removing) > 0 {
		return
	}
	r.flush() // the last events, before the bus closes
	r.closed = true
	r.out.pool.Store(emptyPool)
	r.out.poolChanged.notify()
	if r.gapTimer != nil {
		r.gapTimer.Stop()
		r.gapTimer = nil
	}
	r.bus.closeAll()
	for _, done := range r.settleWaiters {
		close(done)
	}
	r.settleWaiters = nil
	for _, done := range r.closeWaiters {
		close(done)
	}
	r.closeWaiters = nil
}

// stopped records that a removed server is gone: its last event, and
// Close's bookkeeping. It runs on whichever comes first, the server's
// stopped view or protoactor's Terminated (a system message, which can
// overtake the view).
func (r *registry) stopped(h *serverHandle) {
	e, ok := r.removing[h]
	if !ok {
		return
	}
	delete(r.removing, h)
	delete(r.actorOf, h.pid.Id)
	prev := StatePending
	if e.view != nil {
		prev = e.view.state
	}
	v := h.view.Load()
	if v.state != StateStopped { // Terminated overtook the final view
		stopped := *v
		stopped.state, stopped.sess, stopped.lists, stopped.since = StateStopped, nil, lists{}, time.Now()
		h.view.Store(&stopped)
		v = &stopped
	}
	r.queueState(v, prev, nil)
	r.maybeClosed()
}

// terminated handles a server actor that stopped. A removed server stops
// by itself; any other stopped because it crashed more often than its
// supervision strategy allows.
func (r *registry) terminated(pid *actor.PID) {
	h, ok := r.actorOf[pid.Id]
	if !ok || !h.pid.Equal(pid) {
		return
	}
	if _, removed := r.removing[h]; removed {
		r.stopped(h)
		return
	}
	name := h.name
	e, ok := r.servers[name]
	if !ok || e.h != h {
		return
	}
	delete(r.actorOf, pid.Id)
	err := fmt.Errorf("the server's actor crashed repeatedly and was stopped")
	r.log.Error().Str("server", name).Msg(err.Error())
	e.dead, e.unconfirmed = true, false
	prev := e.h.view.Load()
	v := *prev
	v.state, v.err, v.sess, v.lists, v.since = StateFailed, err, nil, lists{}, time.Now()
	e.h.view.Store(&v)
	r.serverChanged(serverChanged{name: name, handle: e.h, view: &v})
}

// publishHandles publishes the configured servers, sorted by name, for
// Status.
func (r *registry) publishHandles() {
	hs := make([]*serverHandle, 0, len(r.servers))
	for _, e := range r.servers {
		hs = append(hs, e.h)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].name < hs[j].name })
	r.out.handles.Store(&hs)
}

// AdmissionStats reports the connect scheduler's counters.
type admissionStats struct {
	Limit   [2]int // local, remote
	Running [2]int
	Peak    [2]int // the most connects that ever ran at once
	Queued  [2]int
}
