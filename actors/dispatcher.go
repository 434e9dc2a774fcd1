package actors

import (
	"sync/atomic"
)

const (
	// mailboxThroughput is protoactor's default: messages a mailbox
	// processes before it yields.
	mailboxThroughput = 300
	// maxIdleWorkers bounds the goroutines kept waiting for work (each
	// keeps its stack, a few KiB).
	maxIdleWorkers = 8
)

// Dispatcher runs the actors' mailboxes (protoactor's Dispatcher),
// and the server actors' goroutines (connect attempts, re-lists, listen
// streams, closes), on goroutines that are kept for the next one once
// they are done, up to maxIdle of them.
//
// Why: protoactor's default dispatcher starts a goroutine every time an
// idle mailbox receives a message, and every such goroutine starts with
// a small stack that the actor's Receive (a connect's result, a pool
// rebuild) then grows, copying it each time; so does every connect
// attempt (exec, negotiation, JSON decoding). A connect storm sends each
// server actor and the registry a message at a time: in a connect of
// 1,000 stdio servers, goroutine starts and stack growth were about a
// tenth of the client's CPU. A kept goroutine has its stack grown
// already.
//
// Schedule never waits: a mailbox runs at once, on an idle worker if one
// is waiting, else on a new goroutine, exactly as with the default
// dispatcher. So a Receive that blocks cannot starve the others.
//
// Concurrency: Schedule, Go and Stop are safe for concurrent use;
// throughput and maxIdle are read-only, idle is atomic, and work and quit
// are channels (quit closed once, by Stop).
type Dispatcher struct {
	throughput int
	maxIdle    int32
	work       chan func()   // unbuffered: a send succeeds only into an idle worker
	quit       chan struct{} // closed by Stop: idle workers end, busy ones end when done
	idle       atomic.Int32  // workers waiting on work (or about to)
}

// NewDispatcher returns a Dispatcher with protoactor's mailbox throughput
// (300 messages before a mailbox yields) that keeps up to 8 idle
// goroutines.
func NewDispatcher() *Dispatcher { return newDispatcher(mailboxThroughput, maxIdleWorkers) }

func newDispatcher(throughput, maxIdle int) *Dispatcher {
	return &Dispatcher{
		throughput: throughput,
		maxIdle:    int32(maxIdle),
		work:       make(chan func()),
		quit:       make(chan struct{}),
	}
}

// Schedule runs fn (a mailbox's run) on an idle worker or a new one.
func (d *Dispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
	default:
		go d.worker(fn)
	}
}

// Go runs f like a go statement, on an idle worker if there is one. A
// nil dispatcher starts a goroutine.
func (d *Dispatcher) Go(f func()) {
	if d == nil {
		go f()
		return
	}
	d.Schedule(f)
}

// Throughput is how many messages a mailbox processes before it yields.
func (d *Dispatcher) Throughput() int { return d.throughput }

func (d *Dispatcher) worker(fn func()) {
	for {
		fn()
		if !d.becomeIdle() {
			return
		}
		select {
		case fn = <-d.work:
			d.idle.Add(-1)
		case <-d.quit:
			d.idle.Add(-1)
			return
		}
	}
}

// becomeIdle counts the calling worker as idle unless maxIdle workers
// already are, in which case it returns false and the worker ends. The
// count never exceeds maxIdle, not even for a moment.
func (d *Dispatcher) becomeIdle() bool {
	for {
		n := d.idle.Load()
		if n >= d.maxIdle {
			return false
		}
		if d.idle.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Stop ends the idle workers; a mailbox scheduled afterwards (protoactor
// finishing its shutdown) runs on a goroutine of its own that ends with
// it.
func (d *Dispatcher) Stop() { close(d.quit) }
