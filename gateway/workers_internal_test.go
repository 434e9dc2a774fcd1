package gateway

import (
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/routine"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// callGoroutines counts the goroutines named gateway.call (a goroutine
// profile with debug=1: "N @ 0x…" heads a record, "# labels: {…}" follows).
func callGoroutines(t *testing.T) int {
	t.Helper()
	var b strings.Builder
	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&b, 1))
	n, count := 0, 0
	for _, line := range strings.Split(b.String(), "\n") {
		if head, _, ok := strings.Cut(line, " @ "); ok {
			count, _ = strconv.Atoi(head)
		}
		if strings.HasPrefix(line, "# labels:") && strings.Contains(line, `"`+routine.Label+`":"gateway.call"`) {
			n += count
		}
	}
	return n
}

// Sequential calls run on one worker that waits for the next (no
// goroutine per call); a burst leaves at most maxIdleWorkers waiting;
// closing ends the waiting ones, and a job run after Close still runs.
func TestCallWorkersReuseAndEnd(t *testing.T) {
	closed := make(chan struct{})
	w := newCallWorkers(closed)
	for i := range 20 {
		done := make(chan struct{})
		w.run(func() { close(done) })
		testwait.Done(t, done, fmt.Sprintf("sequential job %d", i))
		require.Eventually(t, func() bool { return w.idle.Load() == 1 }, 10*time.Second, time.Millisecond, "the worker waits for the next job")
	}
	assert.Equal(t, 1, callGoroutines(t), "twenty sequential jobs, one goroutine")

	// A burst: more jobs at once than maxIdleWorkers.
	release := make(chan struct{})
	var started, finished sync.WaitGroup
	for range 2 * maxIdleWorkers {
		started.Add(1)
		finished.Add(1)
		w.run(func() {
			defer finished.Done()
			started.Done()
			<-release // testwait:ok closed below, before the test waits on finished
		})
	}
	testwait.Call(t, "every job of the burst starts (one worker each)", started.Wait)
	close(release)
	testwait.Call(t, "every job of the burst ends", finished.Wait)
	require.Eventually(t, func() bool { return callGoroutines(t) == maxIdleWorkers }, 10*time.Second, time.Millisecond,
		"after the burst, maxIdleWorkers wait and the rest end")

	close(closed)
	require.Eventually(t, func() bool { return callGoroutines(t) == 0 }, 10*time.Second, time.Millisecond, "closing ends the waiting workers")
	done := make(chan struct{})
	w.run(func() { close(done) })
	testwait.Done(t, done, "a job run after Close")
	require.Eventually(t, func() bool { return callGoroutines(t) == 0 }, 10*time.Second, time.Millisecond, "its worker ends after it")
}
