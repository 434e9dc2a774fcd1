package cluster

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/cluster/internal/wire"
	"github.com/mcpvisor/mcpvisor/internal/routine"
)

// grain is the actor of one supervised server on the member that owns
// it. Its activation puts the server into the member-local Supervisor, its
// stop takes it out; a call runs on its own goroutine against the local
// System and answers the caller's future directly, so the mailbox never
// waits on I/O.
type grain struct {
	m    *engine
	name string
	// placed is set once the grain put its server on this member: after
	// the other members released it (a grain started while the member
	// drains places nothing).
	placed bool
}

// Receive handles the grain's lifecycle and the messages of wire.proto.
func (g *grain) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		id := pcluster.GetClusterIdentity(ctx)
		if id != nil {
			g.name = id.Identity
		}
		if g.m.isDraining() {
			return // leaving: calls are refused, nothing is placed
		}
		if id != nil && g.m.lookup.owner(id) != g.m.sys.Address() {
			// disthash's placement actor activates whatever reaches it,
			// owner or not: a request routed by a topology older than
			// this member's (or read just before it changed) would
			// start the server here after disthash stopped it for
			// moving, and nothing would stop it again. Refuse: the
			// caller's request dead-letters and it retries through its
			// updated lookup.
			g.m.log.Debug().Str("server", g.name).Msg("refused an activation of a server another member owns")
			ctx.Stop(ctx.Self())
			return
		}
		g.m.grains.started(g.name, ctx.Self())
		// Place the server only once no other member holds it
		// (handover.go); calls meanwhile are answered "not ready".
		self, root, name := ctx.Self(), g.m.sys.Root, g.name
		routine.Go("cluster.handover", func() {
			g.m.handover(g.m.stopCtx, name)
			root.Send(self, handedOver{})
		})
	case handedOver:
		if g.m.isDraining() {
			return
		}
		g.placed = true
		g.m.emit(MemberActivated, g.name)
		g.m.placement.push(g.name, true)
	case *actor.Stopping:
		if g.placed {
			g.m.placement.push(g.name, false)
		}
	case *actor.Stopped:
		g.m.grains.stopped(g.name, ctx.Self())
	case *wire.Activate:
		ctx.Respond(&wire.Activated{Member: g.m.id})
	case *wire.CallTool:
		g.call(ctx, msg)
	}
}

// call runs msg on the local Supervisor on a goroutine of its own and sends
// the CallResult to the caller's future.
func (g *grain) call(ctx actor.Context, msg *wire.CallTool) {
	sender := ctx.Sender()
	if sender == nil {
		return // a Send, not a Request: nobody to answer
	}
	if !g.m.enter() {
		r := resultOf(ErrDraining)
		r.Member = g.m.id
		ctx.Respond(r)
		return
	}
	root := g.m.sys.Root
	go func() {
		defer g.m.inflight.Done()
		r := g.m.runLocal(msg)
		r.Member = g.m.id
		root.Send(sender, r)
	}()
}

// runLocal calls a tool of a server this member holds.
func (m *engine) runLocal(msg *wire.CallTool) *wire.CallResult {
	// The caller's deadline (its context's, else the server's timeoutMs,
	// else the supervisor's CallTimeout) travels as TimeoutMs; without
	// one the local Supervisor applies its own default.
	ctx, cancel := context.WithCancel(m.stopCtx)
	defer cancel()
	if timeout := time.Duration(msg.GetTimeoutMs()) * time.Millisecond; timeout > 0 {
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithTimeout(ctx, timeout)
		defer cancelTimeout()
	}
	// The caller's principal, if any: a server with per-user or exchange
	// credentials is called through the principal's own session
	// (userauth.go).
	ctx = withWirePrincipal(ctx, msg.GetPrincipal())
	// A server placed here a moment ago is still connecting: say so (the
	// caller retries within its deadline) rather than "unknown tool".
	state, err := m.local.Server(msg.GetServer()).State()
	if err != nil {
		// The grain is active but the placement worker has not added the
		// server yet: it is pending.
		return &wire.CallResult{Kind: wire.ErrorKind_ERROR_KIND_NOT_READY, State: string(mcpvisor.StatePending), Message: "being placed on this member"}
	}
	// A per-user server whose own connection needs authorization serves
	// a principal through the principal's session: the local supervisor
	// opens it, or says what the principal must authorize.
	byPrincipal := msg.GetPrincipal() != nil && state == mcpvisor.StateNeedsAuth && m.perPrincipal(msg.GetServer())
	if !byPrincipal && (state != mcpvisor.StateReady || !m.local.Server(msg.GetServer()).PoolReflects()) {
		return &wire.CallResult{Kind: wire.ErrorKind_ERROR_KIND_NOT_READY, State: string(state), Message: "not ready on this member"}
	}
	name, ok := m.local.Server(msg.GetServer()).ToolName(msg.GetTool())
	if !ok {
		return resultOf(mcpvisor.ErrUnknownTool)
	}
	res, err := m.local.CallTool(ctx, name, json.RawMessage(msg.GetArguments()))
	if err != nil {
		return resultOf(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return resultOf(err)
	}
	return &wire.CallResult{Result: b}
}

// placementQueue applies grain activations and stops to the local Supervisor
// in the order they happened, in batches (one PatchServers for all that
// is pending), so that thousands of servers re-homed at once cost a few
// registry round trips.
//
// Concurrency: push is called from grain actors (any goroutine); run is
// the member's placement goroutine.
type placementQueue struct {
	m   *engine
	mu  sync.Mutex
	ops []placementOp // guarded by mu
	// flushed are closed once the ops pushed before them are applied
	// (guarded by mu).
	flushed []chan struct{}
	wake    chan struct{}
	active  map[string]bool
	// live holds the names whose grains placed their server here and
	// were not released yet, each with a channel closed at its release
	// (guarded by mu).
	live map[string]chan struct{}
}

type placementOp struct {
	name string
	add  bool
}

func newPlacementQueue(m *engine) *placementQueue {
	return &placementQueue{m: m, wake: make(chan struct{}, 1), active: map[string]bool{}, live: map[string]chan struct{}{}}
}

func (q *placementQueue) push(name string, add bool) {
	q.mu.Lock()
	q.ops = append(q.ops, placementOp{name: name, add: add})
	if _, ok := q.live[name]; add && !ok {
		q.live[name] = make(chan struct{})
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// liveNames returns the names whose grains started here and were not
// released yet.
func (q *placementQueue) liveNames() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	names := make([]string, 0, len(q.live))
	for n := range q.live {
		names = append(names, n)
	}
	return names
}

// released records that name's activation here is over and says so.
func (q *placementQueue) released(name string) {
	q.mu.Lock()
	done, was := q.live[name]
	delete(q.live, name)
	q.mu.Unlock()
	if was {
		q.m.emit(MemberReleased, name)
		close(done)
	}
}

// liveDone returns a channel closed once name's server, placed here, is
// released, or nil when it is not placed here.
func (q *placementQueue) liveDone(name string) <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if done, ok := q.live[name]; ok {
		return done
	}
	return nil
}

// flush returns a channel closed once every op pushed so far is
// applied.
func (q *placementQueue) flush() <-chan struct{} {
	done := make(chan struct{})
	q.mu.Lock()
	q.flushed = append(q.flushed, done)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return done
}

// run applies batches until ctx ends.
func (q *placementQueue) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		}
		q.mu.Lock()
		ops, flushed := q.ops, q.flushed
		q.ops, q.flushed = nil, nil
		q.mu.Unlock()
		q.apply(ctx, ops)
		for _, done := range flushed {
			close(done)
		}
	}
}

// apply folds ops (the last one per name wins) into one PatchServers.
func (q *placementQueue) apply(ctx context.Context, ops []placementOp) {
	final := map[string]bool{}
	for _, op := range ops {
		final[op.name] = op.add
	}
	set := map[string]mcpvisor.ServerConfig{}
	var drop []string
	for name, add := range final {
		if add && !q.m.isDraining() {
			if cfg, ok := q.m.config(name); ok {
				set[name] = cfg
			}
			// Not configured (yet): the grain stays live and holds no
			// server; SetServers places it if its name arrives.
			continue
		}
		if q.active[name] {
			drop = append(drop, name)
		} else {
			q.released(name) // its grain held no server
		}
	}
	if len(set) == 0 && len(drop) == 0 {
		return
	}
	if _, err := q.m.local.PatchServers(ctx, set, drop); err != nil {
		q.m.log.Warn().Err(err).Int("add", len(set)).Int("drop", len(drop)).Msg("placing servers on the local supervisor")
		return
	}
	for name := range set {
		q.active[name] = true
	}
	for _, name := range drop {
		delete(q.active, name)
		q.released(name)
	}
}
