package stdio

import (
	"sync"
	"testing"
	"time"
)

// recorder is a Receiver that keeps everything it is given.
type recorder struct {
	mu        sync.Mutex
	frames    []string
	frameErrs []error
	closedErr error
	closed    chan struct{}
	gotFrame  chan struct{}
}

func newRecorder() *recorder {
	return &recorder{closed: make(chan struct{}), gotFrame: make(chan struct{}, 1024)}
}

func (r *recorder) Frame(b []byte) {
	r.mu.Lock()
	r.frames = append(r.frames, string(b))
	r.mu.Unlock()
	r.gotFrame <- struct{}{}
}

func (r *recorder) FrameError(err error) {
	r.mu.Lock()
	r.frameErrs = append(r.frameErrs, err)
	r.mu.Unlock()
	r.gotFrame <- struct{}{}
}

func (r *recorder) Closed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.closed:
		panic("Closed called twice")
	default:
	}
	r.closedErr = err
	close(r.closed)
}

func (r *recorder) waitFrames(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		got := len(r.frames) + len(r.frameErrs)
		frames := append([]string(nil), r.frames...)
		r.mu.Unlock()
		if got >= n {
			return frames
		}
		select {
		case <-r.gotFrame:
		case <-deadline:
			t.Fatalf("got %d frames, want %d", got, n)
		}
	}
}

func (r *recorder) waitClosed(t *testing.T) error {
	t.Helper()
	select {
	case <-r.closed:
		return r.closedErr
	case <-time.After(10 * time.Second):
		t.Fatal("Closed was not delivered")
		return nil
	}
}
