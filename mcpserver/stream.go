package mcpserver

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// stream is the numbered events of one event stream of an HTTP session:
// its standalone stream (number 0, read by GET streams), or a resumable
// POST stream (HTTPOptions.SSEResponses). Producers push; readers (a GET
// stream, the POST's response) read from a cursor of their own, each
// getting every event; the newest size events are kept, so that a reader
// that comes back with Last-Event-ID gets what it missed. Pushing never
// blocks; the oldest event is dropped when the stream is full.
//
// Concurrency: mu guards everything but no and size; wake is closed (and
// replaced) on every change.
type stream struct {
	no   uint32
	size int
	// forgetOnRead: the session forgets the stream once a reader has
	// read it to its end (a polled request's stream: HTTPOptions.PollAfter).
	forgetOnRead bool

	mu      sync.Mutex
	events  []event // the kept events, oldest first; guarded by mu
	seq     uint64  // number of the newest event; guarded by mu
	done    bool    // nothing more will be pushed; guarded by mu
	wake    chan struct{}
	dropped uint64 // guarded by mu
}

// event is one event of a stream.
type event struct {
	seq   uint64
	data  []byte           // a JSON-RPC message
	write func(Wire) error // an answer of ResponseWriter.ReplyWith (data is nil)
	retry time.Duration    // > 0: the priming event (no data)
}

func newStream(no uint32, size int) *stream {
	return &stream{no: no, size: size, wake: make(chan struct{})}
}

// push appends an event; false when the stream has ended.
func (st *stream) push(ev event) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.pushLocked(ev)
}

func (st *stream) pushLocked(ev event) bool {
	if st.done {
		return false
	}
	st.seq++
	ev.seq = st.seq
	if len(st.events) == st.size {
		st.events = st.events[1:]
		st.dropped++
	}
	st.events = append(st.events, ev)
	st.changedLocked()
	return true
}

// finish appends a last event and ends the stream.
func (st *stream) finish(ev event) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.pushLocked(ev) {
		st.done = true
	}
}

// end ends the stream: its readers stop once they have read what it
// holds.
func (st *stream) end() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.done {
		st.done = true
		st.changedLocked()
	}
}

// cut ends the stream at once, dropping what it holds.
func (st *stream) cut() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.done = true
	st.events = nil
	st.changedLocked()
}

func (st *stream) changedLocked() {
	close(st.wake)
	st.wake = make(chan struct{})
}

// last returns the number of the newest event.
func (st *stream) last() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.seq
}

// since returns the kept events after number after, a channel closed at
// the next change, and whether the stream has ended.
func (st *stream) since(after uint64) (evs []event, wake <-chan struct{}, done bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, ev := range st.events {
		if ev.seq > after {
			evs = append(evs, st.events[i:]...)
			break
		}
	}
	return evs, st.wake, st.done
}

// eventID formats the id of event seq of stream no: the number alone on
// the standalone stream, "<no>-<seq>" on a POST stream.
func eventID(no uint32, seq uint64) string {
	if no == 0 {
		return strconv.FormatUint(seq, 10)
	}
	return strconv.FormatUint(uint64(no), 10) + "-" + strconv.FormatUint(seq, 10)
}

// parseEventID parses an id made by eventID.
func parseEventID(id string) (no uint32, seq uint64, ok bool) {
	a, b, found := strings.Cut(strings.TrimSpace(id), "-")
	if !found {
		q, err := strconv.ParseUint(a, 10, 64)
		return 0, q, err == nil
	}
	n, err1 := strconv.ParseUint(a, 10, 32)
	q, err2 := strconv.ParseUint(b, 10, 64)
	return uint32(n), q, err1 == nil && err2 == nil && n > 0
}
