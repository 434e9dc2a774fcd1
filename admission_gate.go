package mcpvisor

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mcpvisor/mcpvisor/actors/admission"
)

// admissionGate is the connect scheduler, shared by the registry (which
// queues servers, takes them out and reads the counts) and the server
// actors' connect goroutines, which hand their slot on themselves: a
// connect that ends frees its slot and starts the next server's connect
// in the same step, instead of four wake-ups later (its actor, the
// registry freeing the slot, the next actor, its connect goroutine).
//
// Concurrency: safe for concurrent use; mu guards s and pids. The
// connectNow messages are sent after mu is released.
type admissionGate struct {
	mu   sync.Mutex
	s    *admission.Scheduler
	pids map[string]*actor.PID // the actors of the servers in line or admitted
	root *actor.RootContext    // set once the registry started, before any enqueue
}

func newAdmissionGate(local, remote int) *admissionGate {
	return &admissionGate{s: admission.New(local, remote), pids: map[string]*actor.PID{}}
}

// admitted is one connect the gate let through: the server's actor and
// its ticket.
type admitted struct {
	pid    *actor.PID
	ticket uint64
}

// enqueue puts a server in line for a slot (once).
func (g *admissionGate) enqueue(name string, c admission.Class, pid *actor.PID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.s.Waiting(name) {
		g.pids[name] = pid
	}
	g.s.Enqueue(name, c)
}

// remove takes a server out of line and frees its slot, if it had one.
// It admits nobody: the caller pumps.
func (g *admissionGate) remove(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.s.Remove(name)
	delete(g.pids, name)
}

// settled frees the slot of the connect of name admitted with ticket, if
// it still holds it. It admits nobody: the caller pumps.
func (g *admissionGate) settled(name string, ticket uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.s.Settled(name, ticket)
}

// waiting reports whether name is in line or admitted.
func (g *admissionGate) waiting(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.s.Waiting(name)
}

// stats returns the scheduler's counters.
func (g *admissionGate) stats() admission.Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.s.Stats()
}

// pump admits queued servers while their class has free slots.
func (g *admissionGate) pump() {
	g.start(g.next(nil))
}

// release is a connect goroutine's end: the slot of name's connect with
// ticket frees (unless it was freed already) and goes to the next server
// in line.
func (g *admissionGate) release(name string, ticket uint64) {
	g.mu.Lock()
	freed := g.s.Settled(name, ticket)
	g.mu.Unlock()
	if freed {
		g.pump()
	}
}

// next admits while slots are free, appending to out.
func (g *admissionGate) next(out []admitted) []admitted {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		name, ticket, ok := g.s.Next()
		if !ok {
			return out
		}
		out = append(out, admitted{pid: g.pids[name], ticket: ticket})
	}
}

// start tells the admitted servers' actors to connect.
func (g *admissionGate) start(list []admitted) {
	for _, a := range list {
		g.root.Send(a.pid, connectNow{ticket: a.ticket})
	}
}
