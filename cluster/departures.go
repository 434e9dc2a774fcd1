package cluster

import (
	"sync"

	pcluster "github.com/asynkron/protoactor-go/cluster"
)

// departures tells the calls in flight on a member that the member left
// the topology (died or left), so that they end at once with a typed
// error instead of waiting for their deadline: protoactor's remote does
// not fail a request whose target process was killed with -9 until the
// request's timeout.
//
// Concurrency: every method is safe for concurrent use; mu guards
// watchers.
type departures struct {
	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{} // by member address
}

func newDepartures() *departures {
	return &departures{watchers: map[string]map[chan struct{}]struct{}{}}
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

// left closes the watchers of every member that left.
func (d *departures) left(members []*pcluster.Member) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, member := range members {
		addr := member.Address()
		for ch := range d.watchers[addr] {
			close(ch)
		}
		delete(d.watchers, addr)
	}
}
