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
// may be answered with input_required first). A worker that finished a
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

// run runs job on a waiting worker, or on a new one when none waits.
func (w *callWorkers) run(job func()) {
	select {
	case w.jobs <- job:
	default:
		routine.Go("gateway.call", func() { w.work(job) })
	}
}

// work runs job, then the jobs that come while it waits.
func (w *callWorkers) work(job func()) {
	for {
		job()
		if w.idle.Add(1) > maxIdleWorkers {
			w.idle.Add(-1)
			return
		}
		select {
		case job = <-w.jobs:
			w.idle.Add(-1)
		case <-w.closed:
			w.idle.Add(-1)
			return
		}
	}
}
