// Package transporttest holds what the transports' tests share: a
// Receiver that records what it is given and checks the contract.
package transporttest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Recorder is a transports.Receiver that keeps everything it is given and
// checks the contract: nothing after Closed, Closed once (a second Closed
// panics).
type Recorder struct {
	// Block, if set before the connection starts, makes Frame wait until
	// it is closed: a receiver that is slow to take a frame.
	Block chan struct{}

	mu        sync.Mutex
	frames    []string // guarded by mu
	frameErrs []error  // guarded by mu
	closedErr error    // guarded by mu
	late      int      // guarded by mu; calls after Closed
	closed    chan struct{}
	got       chan struct{} // signalled (never blocking) after each Frame and FrameError
	blocked   chan struct{} // signalled when Frame starts waiting on Block
}

var _ transports.Receiver = (*Recorder)(nil)

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{closed: make(chan struct{}), got: make(chan struct{}, 1), blocked: make(chan struct{}, 1)}
}

// IsClosed reports whether Closed was called.
func (r *Recorder) IsClosed() bool {
	select {
	case <-r.closed:
		return true
	default:
		return false
	}
}

// Frame records a frame.
func (r *Recorder) Frame(b []byte) {
	if r.Block != nil {
		signal(r.blocked)
		<-r.Block
	}
	r.mu.Lock()
	if r.IsClosed() {
		r.late++
	}
	r.frames = append(r.frames, string(b))
	r.mu.Unlock()
	signal(r.got)
}

// signal wakes the waiter on ch, if it is not awake already.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// WaitBlocked waits until Frame is waiting on Block: the receiver holds
// a frame and the connection's reader waits for it.
func (r *Recorder) WaitBlocked(t *testing.T) {
	t.Helper()
	testwait.Done(t, r.blocked, "the receiver to be given a frame (and block on it)")
}

// FrameError records a dropped frame.
func (r *Recorder) FrameError(err error) {
	r.mu.Lock()
	if r.IsClosed() {
		r.late++
	}
	r.frameErrs = append(r.frameErrs, err)
	r.mu.Unlock()
	signal(r.got)
}

// Closed records the end of the connection.
func (r *Recorder) Closed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.IsClosed() {
		panic("Closed called twice")
	}
	r.closedErr = err
	close(r.closed)
}

// Frames returns the frames recorded so far.
func (r *Recorder) Frames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.frames...)
}

// Wait waits (up to 10 s) until n frames and frame errors in all were
// recorded, and returns them.
func (r *Recorder) Wait(t *testing.T, n int) ([]string, []error) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		frames, errs := append([]string(nil), r.frames...), append([]error(nil), r.frameErrs...)
		r.mu.Unlock()
		if len(frames)+len(errs) >= n {
			return frames, errs
		}
		select {
		case <-r.got:
		case <-deadline:
			t.Fatalf("got %d frames and %d frame errors, want %d in all", len(frames), len(errs), n)
		}
	}
}

// WaitClosed waits (up to 10 s) for Closed, checks that nothing came
// after it, and returns its cause.
func (r *Recorder) WaitClosed(t *testing.T) error {
	t.Helper()
	select {
	case <-r.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Closed was not called")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Zero(t, r.late, "Frame or FrameError after Closed")
	return r.closedErr
}

// AssertOpen fails the test if the connection ended.
func (r *Recorder) AssertOpen(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.False(t, r.IsClosed(), "the connection ended: %v", r.closedErr)
}
