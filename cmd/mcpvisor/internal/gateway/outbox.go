package gateway

import "sync"

// outbox holds an HTTP session's notifications for its GET stream: the
// latest size frames, numbered, so that a stream that reconnects with
// Last-Event-ID gets what it missed. Pushing never blocks; the oldest frame
// is dropped (and counted) when full.
type outbox struct {
	mu      sync.Mutex
	size    int
	seq     uint64   // number of the newest frame; guarded by mu
	frames  [][]byte // frames seq-len(frames)+1 … seq; guarded by mu
	wake    chan struct{}
	closed  bool   // guarded by mu
	dropped uint64 // guarded by mu
}

func newOutbox(size int) *outbox { return &outbox{size: size, wake: make(chan struct{})} }

func (o *outbox) push(frame []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.seq++
	if len(o.frames) == o.size {
		o.frames = o.frames[1:]
		o.dropped++
	}
	o.frames = append(o.frames, frame)
	close(o.wake)
	o.wake = make(chan struct{})
}

// since returns the frames after number after (and the number of the
// first), a channel closed on the next push, and whether the outbox is
// closed.
func (o *outbox) since(after uint64) (frames [][]byte, first uint64, wake <-chan struct{}, closed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	oldest := o.seq - uint64(len(o.frames)) + 1
	after = min(after, o.seq)
	if after+1 < oldest {
		after = oldest - 1
	}
	if after < o.seq {
		frames = append(frames, o.frames[after+1-oldest:]...)
	}
	return frames, after + 1, o.wake, o.closed
}

func (o *outbox) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed {
		o.closed = true
		close(o.wake)
	}
}
