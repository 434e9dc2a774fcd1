package mockserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports/eventstream"
)

// maxEvents bounds the events a stream keeps: the retained tail of a
// resumable stream, or the backlog of one nobody drains.
const maxEvents = 1024

// stream is the sequence of messages of one HTTP response: a POST's
// answer (JSON or an event stream), a Streamable HTTP session's standalone
// GET stream, a subscriptions/listen stream, or a legacy SSE session's
// stream. Producers append (send, notify, end); the one response attached
// at a time drains it (pump, await). A resumable stream keeps its recent
// events, with ids, so that a GET with Last-Event-ID replays them on a
// new response; any other stream forgets what it delivered.
//
// A stream is both an output and a sink. The fields above mu are set at
// creation and never change.
type stream struct {
	no        uint32 // number within the session; event ids are "<no>-<seq>"
	evType    string // SSE event type; "" is message
	resumable bool   // events carry ids and are retained
	answer    bool   // a POST's stream: it is done once the answer is in
	garbage   bool   // a non-JSON event goes before each message

	mu     sync.Mutex
	events []event       // guarded by mu: retained or undelivered events, oldest first
	seq    uint32        // guarded by mu: seq of the last event appended
	done   bool          // guarded by mu: nothing more will be appended
	owner  uint64        // guarded by mu: token of the response draining it
	wake   chan struct{} // guarded by mu: closed (and replaced) on every change
}

// event is one SSE event of a stream.
type event struct {
	seq      uint32
	data     []byte        // a JSON-RPC message, garbage, or empty (priming)
	retry    time.Duration // the priming event's retry field
	oversize int64         // > 0: the event is a response to id this large, written on the fly
	id       protocol.ID   // the oversize response's id
	partial  bool          // CrashMidResponse: only the first half of data is written, and the server dies
}

func newStream(no uint32, evType string, resumable, answer, garbage bool) *stream {
	return &stream{no: no, evType: evType, resumable: resumable, answer: answer, garbage: garbage, wake: make(chan struct{})}
}

func (st *stream) send(frame []byte) { st.push(event{data: frame}, st.answer) }

func (st *stream) sendOversize(id protocol.ID, size int64) {
	st.push(event{oversize: size, id: id}, st.answer)
}

func (st *stream) notify(frame []byte) { st.push(event{data: frame}, false) }

// crash appends the answer the server dies while writing, and ends the
// stream: the response that writes it writes half of it and then ends
// the server (pump returns errCrashed).
func (st *stream) crash(frame []byte) bool {
	st.push(event{data: frame, partial: true}, true)
	return false
}

// prime appends the priming event: an id, the retry field, empty data.
func (st *stream) prime(retry time.Duration) { st.push(event{retry: retry}, false) }

// finish appends a last message and ends the stream.
func (st *stream) finish(frame []byte) { st.push(event{data: frame}, true) }

// end ends the stream: its response closes once it has drained it.
func (st *stream) end() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.done = true
	st.changed()
}

// cut ends the stream at once, dropping what its response has not written.
func (st *stream) cut() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.done = true
	st.events = nil
	st.changed()
}

func (st *stream) push(ev event, last bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done {
		return
	}
	if st.garbage && (ev.data != nil || ev.oversize > 0) {
		st.seq++
		st.events = append(st.events, event{seq: st.seq, data: []byte(garbageLine)})
	}
	st.seq++
	ev.seq = st.seq
	st.events = append(st.events, ev)
	if len(st.events) > maxEvents {
		st.events = append(st.events[:0:0], st.events[len(st.events)-maxEvents:]...)
	}
	st.done = last
	st.changed()
}

// changed wakes the response draining the stream. Called with mu held.
func (st *stream) changed() {
	close(st.wake)
	st.wake = make(chan struct{})
}

// attach makes the caller the stream's only drainer and returns its
// token; a response attached before stops at its next wake-up.
func (st *stream) attach() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.owner++
	st.changed()
	return st.owner
}

// last returns the seq of the last event appended.
func (st *stream) last() uint32 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.seq
}

// eventID formats the id of event seq of stream no.
func eventID(no, seq uint32) string {
	return strconv.FormatUint(uint64(no), 10) + "-" + strconv.FormatUint(uint64(seq), 10)
}

// parseEventID parses an id made by eventID.
func parseEventID(id string) (no, seq uint32, ok bool) {
	a, b, found := strings.Cut(id, "-")
	n, err1 := strconv.ParseUint(a, 10, 32)
	q, err2 := strconv.ParseUint(b, 10, 32)
	return uint32(n), uint32(q), found && err1 == nil && err2 == nil
}

// errStolen, errDead and errCrashed are why pump stopped early.
var (
	errStolen  = errors.New("mockserver: another response attached to the stream")
	errDead    = errors.New("mockserver: the server exited")
	errCrashed = errors.New("mockserver: the server crashed in the middle of an answer")
)

// pump writes the stream's events after seq as an event stream to w,
// flushing after each batch, until the stream is done and drained (nil),
// another response attaches (errStolen), ctx ends, dead is closed
// (errDead), it has written half of a crash's answer (errCrashed: the
// caller must end the server), or writing fails.
func (st *stream) pump(ctx context.Context, w http.ResponseWriter, after uint32, dead <-chan struct{}) error {
	rc := http.NewResponseController(w)
	token := st.attach()
	var batch []event
	for {
		st.mu.Lock()
		if st.owner != token {
			st.mu.Unlock()
			return errStolen
		}
		batch = batch[:0]
		for _, ev := range st.events {
			if ev.seq > after {
				batch = append(batch, ev)
			}
		}
		if !st.resumable {
			st.events = st.events[:0]
		}
		done, wake := st.done, st.wake
		st.mu.Unlock()

		for _, ev := range batch {
			if err := st.write(w, ev); err != nil {
				return err
			}
			after = ev.seq
			if ev.partial {
				_ = rc.Flush()
				return errCrashed
			}
		}
		if len(batch) > 0 {
			if err := rc.Flush(); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-dead:
			return errDead
		}
	}
}

// write writes one event; of a partial one, the fields before data and
// the first half of data, on one line that does not end.
func (st *stream) write(w io.Writer, ev event) error {
	id := ""
	if st.resumable {
		id = eventID(st.no, ev.seq)
	}
	if ev.oversize == 0 && !ev.partial {
		return eventstream.Write(w, eventstream.Event{ID: id, Type: st.evType, Data: ev.data}, ev.retry)
	}
	// An oversize response, written as it is made, or a partial one: one
	// data line.
	head := ""
	if id != "" {
		head += "id: " + id + "\n"
	}
	if st.evType != "" {
		head += "event: " + st.evType + "\n"
	}
	if _, err := io.WriteString(w, head+"data: "); err != nil {
		return err
	}
	if ev.partial {
		_, err := w.Write(ev.data[:len(ev.data)/2])
		return err
	}
	if err := writeOversize(w, ev.id, ev.oversize); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n\n")
	return err
}

// await waits until the stream is done and returns its last event; ok is
// false when it ended without one, or ctx ended or dead was closed first.
func (st *stream) await(ctx context.Context, dead <-chan struct{}) (ev event, ok bool) {
	for {
		st.mu.Lock()
		done, wake := st.done, st.wake
		if done && len(st.events) > 0 {
			ev, ok = st.events[len(st.events)-1], true
		}
		st.mu.Unlock()
		if done {
			return ev, ok
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return event{}, false
		case <-dead:
			return event{}, false
		}
	}
}
