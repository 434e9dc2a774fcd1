package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mcpvisor/mcpvisor/cluster/internal/wire"
	"github.com/mcpvisor/mcpvisor/internal/routine"
)

// A server never runs on two members at once. A topology change stops
// the old owner's grain (disthash poisons the grains it no longer owns)
// and starts the new owner's (its reconciler, or a call) concurrently,
// and the old owner's local supervisor may take a while to close the
// server's connection. So a grain that starts does not place its server
// at once: it first asks every other member of the topology to Release
// the server (stop its grain there and drop the server), and places it
// once all have answered or handoverTimeout has passed. Calls that reach
// it meanwhile are answered "not ready" and retried by the caller.

// memberActorName names each member's own actor: every member answers
// Release (the hand-over) and takes Removed (fence.go) at
// actor.NewPID(<its address>, memberActorName).
const memberActorName = "mcpvisor-member"

// handoverTimeout bounds how long a starting grain waits for the other
// members' answers (a member that does not answer, because it died and
// the topology does not know yet, cannot hold the server for long: its
// calls fail), and how long a member waits for its own release.
const handoverTimeout = 10 * time.Second

// handedOver tells a grain that every other member released its server
// (a local message, never sent across members).
type handedOver struct{}

// grains records the grain of each server that runs on this member,
// started and not yet stopped, so that a Release can stop it.
//
// Concurrency: every method is safe for concurrent use; mu guards pids.
type grains struct {
	mu   sync.Mutex
	pids map[string]*actor.PID // by server name
}

func newGrains() *grains { return &grains{pids: map[string]*actor.PID{}} }

func (g *grains) started(name string, pid *actor.PID) {
	g.mu.Lock()
	g.pids[name] = pid
	g.mu.Unlock()
}

// stopped forgets name's grain if pid is still the one recorded (a newer
// grain of the same name may have started since).
func (g *grains) stopped(name string, pid *actor.PID) {
	g.mu.Lock()
	if cur := g.pids[name]; cur != nil && cur.Equal(pid) {
		delete(g.pids, name)
	}
	g.mu.Unlock()
}

func (g *grains) get(name string) *actor.PID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pids[name]
}

// memberActor answers Release (the waiting runs on a goroutine of its
// own, so the mailbox never waits on a server's shutdown), records the
// members that announce they drain (Draining), and fences the member on
// a Removed that names it.
type memberActor struct{ m *engine }

func (a *memberActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *wire.Release:
		a.release(ctx, msg)
	case *wire.Draining:
		// The sender leaves gracefully: no call goes to it from now on
		// (calls.go), then the acknowledgement follows every call sent
		// to it before, on the same stream.
		a.m.departed.drains(msg.GetAddress())
		ctx.Respond(&wire.DrainingSeen{Member: a.m.id})
	case *wire.Removed:
		// A member that left gracefully is told too (the others saw it
		// go while it waits for the last calls): nothing to fence.
		if msg.GetMember() == a.m.id && !a.m.left.Load() {
			m := a.m
			routine.Go("cluster.removed", func() { m.fencing.removedBy(m.stopCtx) })
		}
	}
}

func (a *memberActor) release(ctx actor.Context, msg *wire.Release) {
	sender := ctx.Sender()
	if sender == nil {
		return
	}
	m := a.m
	root := m.sys.Root
	routine.Go("cluster.release", func() {
		held := m.release(msg.GetServer())
		root.Send(sender, &wire.Released{Member: m.id, Held: held})
	})
}

// release stops this member's grain of name, if any, and waits (within
// handoverTimeout) until the local Supervisor no longer holds the server. It
// reports whether there was anything to release.
func (m *engine) release(name string) bool {
	held := false
	if pid := m.grains.get(name); pid != nil {
		held = true
		// Stop is a system message: the grain stops before it handles a
		// handedOver already in its mailbox, so it never places the
		// server after this.
		_ = m.sys.Root.StopFuture(pid).Wait()
	}
	// The grain's Stopping pushed the drop; wait until it is applied.
	if done := m.placement.liveDone(name); done != nil {
		held = true
		timer := time.NewTimer(handoverTimeout)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			m.log.Warn().Str("server", name).Msg("releasing a server for another member took too long")
		case <-m.stopCtx.Done():
		}
	}
	return held
}

// handover asks every other member of the current topology to release
// name, in parallel, and returns once all answered, handoverTimeout
// passed or ctx ended; it leaves no goroutine behind.
func (m *engine) handover(ctx context.Context, name string) {
	t := m.reconcile.latest()
	if t == nil {
		return
	}
	me := m.sys.Address()
	var wg sync.WaitGroup
	var futures []*actor.Future
	for _, member := range t.Members {
		addr := member.Address()
		if addr == me {
			continue
		}
		f := m.sys.Root.RequestFuture(actor.NewPID(addr, memberActorName), &wire.Release{Server: name}, handoverTimeout)
		futures = append(futures, f)
		wg.Go(func() {
			res, err := f.Result()
			if err != nil {
				// Dead letter (the member is gone) or no answer in time.
				m.log.Debug().Err(err).Str("server", name).Str("member", addr).Msg("hand-over: no answer")
				return
			}
			if r, ok := res.(*wire.Released); ok && r.GetHeld() {
				m.log.Debug().Str("server", name).Str("member", r.GetMember()).Msg("hand-over: released")
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		// Unanswered futures would hold their goroutines until
		// handoverTimeout, past the member's Close: stopping a future
		// completes it at once (with the Stop, not a Released).
		for _, f := range futures {
			m.sys.Root.Stop(f.PID())
		}
		<-done
	}
}
