package routine

import (
	"strings"
	"testing"
	"time"

	"runtime/pprof"

	"github.com/stretchr/testify/assert"
)

// goroutines returns the goroutine profile with labels (debug=1).
func goroutines(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatalf("goroutine profile: %v", err)
	}
	return b.String()
}

// await fails the test unless ch is closed within 10 s.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10 s", what)
	}
}

// A goroutine started by Go carries its name (and the extra labels) in a
// goroutine profile while it runs; a worker that ran a job under Run
// carries the job's name only while it runs.
func TestGoNamesTheGoroutine(t *testing.T) {
	release, running, workerIdle, done := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	Go("test.block", func() {
		close(running)
		<-release // testwait:ok the test closes release before it returns
	}, "server", "alpha")
	go func() { // a pool worker: one named job, then idle
		defer close(done)
		Run("test.job", func() {})
		close(workerIdle)
		<-release
	}()
	await(t, running, "the named goroutine starts")
	await(t, workerIdle, "the worker finishes its job")
	prof := goroutines(t)
	assert.Contains(t, prof, `"mcpvisor":"test.block"`)
	assert.Contains(t, prof, `"server":"alpha"`)
	assert.Contains(t, prof, "routine.Go.func1", "every named goroutine begins in routine.Go")
	assert.NotContains(t, prof, `"mcpvisor":"test.job"`, "the worker drops the job's name when the job ends")
	close(release)
	await(t, done, "the worker ends")
}
