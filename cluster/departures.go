package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/mcpvisor/mcpvisor/cluster/internal/wire"
	"github.com/mcpvisor/mcpvisor/internal/routine"
)

// drainingNoticeTimeout bounds how long a leaving member waits for the
// other members to acknowledge its Draining notice.
const drainingNoticeTimeout = 2 * time.Second

// departures tells the calls in flight on a member that the member left
// the topology (died or left), so that they end at once with a typed
// error instead of waiting for their deadline: protoactor's remote does
// not fail a request whose target process was killed with -9 until the
// request's timeout. It also keeps the members known to drain (they
// announced a graceful leave, or refused a call as draining): such a
// member refuses every call from then on, for good, so a call sent to it
// after it was known to drain provably did not run there, and the caller
// tries the server's next owner instead.
//
// Concurrency: every method is safe for concurrent use; mu guards
// watchers and draining.
type departures struct {
	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{} // by member address
	// draining holds the addresses of the members known to drain; an
	// address is forgotten when a member joins on it (a new member).
	draining map[string]bool
}

func newDepartures() *departures {
	return &departures{watchers: map[string]map[chan struct{}]struct{}{}, draining: map[string]bool{}}
}

// watch returns a channel closed when the member at addr leaves the
// topology, and a function that stops watching.
func (d *departures) watch(addr string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watchers[addr] == nil {
		d.watchers[addr] = map[chan struct{}]struct{}{}
	}
	d.watchers[addr][ch] = struct{}{}
	return ch, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if w, ok := d.watchers[addr]; ok {
			if _, live := w[ch]; live {
				delete(w, ch)
				if len(w) == 0 {
					delete(d.watchers, addr)
				}
			}
		}
	}
}

// changed follows a topology change: it closes the watchers of every
// member that left, and forgets that an address drains when a new member
// joined on it.
func (d *departures) changed(t *pcluster.ClusterTopology) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, member := range t.Joined {
		delete(d.draining, member.Address())
	}
	for _, member := range t.Left {
		addr := member.Address()
		for ch := range d.watchers[addr] {
			close(ch)
		}
		delete(d.watchers, addr)
	}
}

// drains records that the member at addr drains (for good).
func (d *departures) drains(addr string) {
	if addr == "" {
		return
	}
	d.mu.Lock()
	d.draining[addr] = true
	d.mu.Unlock()
}

// isDraining says whether the member at addr is known to drain.
func (d *departures) isDraining(addr string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.draining[addr]
}

// announce tells every other member of t that this member (id, at
// address me) drains, in parallel, and returns once all acknowledged,
// drainingNoticeTimeout passed or ctx ended. A member that acknowledged
// sends this one no call from then on; a call it sent before reached
// this member before the acknowledgement did (one stream per pair of
// members, in order), so this member answers it before it leaves.
func (d *departures) announce(ctx context.Context, root *actor.RootContext, t *pcluster.ClusterTopology, id, me string) {
	if t == nil {
		return
	}
	var futures []*actor.Future
	for _, member := range t.Members {
		if addr := member.Address(); addr != me {
			futures = append(futures, root.RequestFuture(actor.NewPID(addr, memberActorName),
				&wire.Draining{Member: id, Address: me}, drainingNoticeTimeout))
		}
	}
	done := make(chan struct{})
	routine.Go("cluster.draining-notice", func() {
		defer close(done)
		for _, f := range futures {
			_, _ = f.Result() // an error: dead letter (gone) or no answer in time
		}
	})
	select {
	case <-done:
	case <-ctx.Done():
		// Stopping a future completes it at once: no goroutine is left
		// waiting for drainingNoticeTimeout.
		for _, f := range futures {
			root.Stop(f.PID())
		}
		<-done
	}
}
