package cluster

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mcpvisor/mcpvisor"
)

// The cluster-wide pool changes when a server's state or tools change on
// any member, or when the topology changes. protoactor's cluster pub-sub
// would carry the first, but a topic dies with the member that owns it
// (notes/protoactor.md §6), so the member does not use it: each member
// pushes its own snapshot (an OverviewReply, fire and forget) to the
// overview actor of every other member of the topology when its servers
// change, and tells its Member (which re-reads the pool, view.go). A push lost with a
// dying member loses nothing a host cannot get back: the host re-reads
// the whole pool with Overview on each signal, and on a topology change,
// when the dead member's servers come up on a survivor, that survivor
// pushes again.

// poolChanging reports whether a local event changes what Overview
// shows.
func poolChanging(t mcpvisor.EventType) bool {
	switch t {
	case mcpvisor.EventServerState, mcpvisor.EventToolsChanged, mcpvisor.EventServerToggled,
		mcpvisor.EventPromptsChanged, mcpvisor.EventResourcesChanged:
		return true
	}
	return false
}

// poolWatch tells the host when the cluster-wide pool may have changed
// and pushes this member's snapshot to the others.
//
// Concurrency: changed and signalPush are called from any goroutine
// (protoactor's event stream, the overview actor, the event pump) and
// never block; run is the member's pusher goroutine, the one reader of
// wake.
type poolWatch struct {
	m *engine
	// onChanged is told that the cluster-wide pool may have changed;
	// called from the engine's goroutines, never blocks.
	onChanged func(member string)
	wake      chan struct{} // wakes the pusher
}

func newPoolWatch(m *engine, onChanged func(member string)) *poolWatch {
	return &poolWatch{m: m, onChanged: onChanged, wake: make(chan struct{}, 1)}
}

// changed tells the host.
func (w *poolWatch) changed(member string) {
	if w.onChanged != nil {
		w.onChanged(member)
	}
}

// signalPush asks the pusher to send this member's snapshot to the
// others (coalesced: one push covers every change before it starts).
func (w *poolWatch) signalPush() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run sends this member's snapshot to every other member's overview
// actor after each signalPush, until ctx ends.
func (w *poolWatch) run(ctx context.Context) {
	m := w.m
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		t := m.reconcile.latest()
		if t == nil || m.left.Load() {
			continue
		}
		snap := m.snapshot()
		self := m.sys.Address()
		for _, member := range t.Members {
			if addr := member.Address(); addr != self {
				m.sys.Root.Send(actor.NewPID(addr, overviewActorName), snap)
			}
		}
	}
}
