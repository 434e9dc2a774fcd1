package actors

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// Everything scheduled runs, also while other work blocks (a blocked
// mailbox or listen stream must not hold up the rest), idle workers are
// kept up to the bound, and stop ends them.
func TestDispatcher(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d := newDispatcher(mailboxThroughput, 2)

	release := make(chan struct{})
	blocked := make(chan struct{})
	d.Go(func() {
		close(blocked)
		<-release // testwait:ok the dispatcher's goroutine; released by the test
	})
	testwait.Done(t, blocked, "the first work to start")

	var ran atomic.Int32
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		d.Schedule(func() {
			defer wg.Done()
			ran.Add(1)
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("scheduled work did not run while one worker was blocked")
	}
	assert.EqualValues(t, 100, ran.Load())
	close(release)

	require.Eventually(t, func() bool { return d.idle.Load() > 0 }, 5*time.Second, time.Millisecond,
		"a worker that finished waits for more work")
	assert.LessOrEqual(t, d.idle.Load(), int32(2), "at most maxIdle workers are kept")

	// Work goes to an idle worker: no new goroutine.
	again := make(chan struct{})
	d.Go(func() { close(again) })
	testwait.Done(t, again, "work given to an idle worker to run")

	d.Stop()
	require.Eventually(t, func() bool { return d.idle.Load() == 0 }, 5*time.Second, time.Millisecond)

	// After stop, work still runs, on a goroutine that ends with it.
	late := make(chan struct{})
	d.Schedule(func() { close(late) })
	testwait.Done(t, late, "work scheduled after stop to run")
}

func TestNilDispatcherStartsGoroutines(t *testing.T) {
	var d *Dispatcher
	done := make(chan struct{})
	d.Go(func() { close(done) })
	testwait.Done(t, done, "the work to run")
}
