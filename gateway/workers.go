package gateway

import (
	"sync/atomic"

	"github.com/mcpvisor/mcpvisor/internal/routine"
)

// maxIdleWorkers bounds the goroutines a callWorkers keeps waiting for
// the next call: more than the calls usually in flight at once, so that
// a steady load starts none; a burst's extra goroutines end when they
// finish their call.
const maxIdleWorkers = 64

// callWorkers runs the calls of stateless-era clients that may need
// input (startInput: the call goes on behind the client's request, which
// may be answered with input_required first); a client that declared no
// capability to be asked with has its calls run inline (serveInput). A worker that finished a
// call waits for the next one: a goroutine started per call grew its
// stack, deep with the supervisor's and the session's frames, on every
// call, a tenth of the gateway's CPU per call.
//
// Concurrency: run is safe for concurrent use. Workers end when closed
// is closed (waiting ones at once, busy ones when their call ends), or
// when maxIdleWorkers are already waiting.
type callWorkers struct {
	jobs   chan func()     // unbuffered: a waiting worker takes the job
	closed <-chan struct{} // the gateway's Close
	idle   atomic.Int64    // workers waiting on jobs
}

func newCallWorkers(closed <-chan struct{}) *callWorkers {
	return &callWorkers{jobs: make(chan func()), closed: closed}
}

// run runs job on a waiting worker, or on a new one when none waits. A
// worker that counted itself waiting is claimed (the count taken down by
// one) and handed the job even when it has not reached its receive yet:
// a send that gave up at once then would start a second worker for a
// sequential call.
func (w *callWorkers) run(job func()) {
	for {
		n := w.idle.Load()
		if n <= 0 {
			break
		}
		if !w.idle.CompareAndSwap(n, n-1) {
			continue
		}
		select {
		case w.jobs <- job:
			return
		case <-w.closed:
			// The claimed worker may have ended instead: a new one runs
			// the job and ends after it.
		}
		break
	}
	routine.Go("gateway.call", func() { w.work(job) })
}

// work runs job, then the jobs that come while it waits. It counts itself
// in idle before it waits; whoever hands it a job has taken the count
// down already.
func (w *callWorkers) work(job func()) {
	for {
		job()
		if w.idle.Add(1) > maxIdleWorkers {
			w.idle.Add(-1)
			return
		}
		select {
		case job = <-w.jobs:
		case <-w.closed:
			w.idle.Add(-1)
			return
		}
	}
}
