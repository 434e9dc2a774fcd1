package mcpserver

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/transports/eventstream"
)

// postResponse is the answer to one POSTed request: plain JSON, unless a
// message that belongs to the request comes first (and the client takes
// event streams), which turns it into an event stream. With resumable
// set (HTTPOptions.SSEResponses, in a session) it is an event stream of
// numbered events from the start, kept by the session for a GET with
// Last-Event-ID; the POST's goroutine writes what the stream holds.
//
// Concurrency: the handler's goroutines deliver (answer, notify) and the
// POST's goroutine writes (finish); mu guards the state and every write
// to w, which stops once finish returns.
type postResponse struct {
	srv       *Server
	w         http.ResponseWriter
	r         *http.Request
	x         *exchange
	sse       bool          // the client takes event streams
	stateless bool          // a stateless-era request: protocol errors are HTTP errors
	sseAnswer bool          // a result goes as a one-event stream (HTTPOptions.SSEResponses, stateless)
	resumable *stream       // the POST stream of HTTPOptions.SSEResponses, in a session
	pollAfter time.Duration // > 0: the response ends for the client to poll after that long (HTTPOptions.PollAfter)

	mu           sync.Mutex
	started      bool // the event stream's headers are written; guarded by mu
	ended        bool // finish has returned: nothing more is written; guarded by mu
	answered     bool // guarded by mu
	abandon      bool // the request ended without an answer; guarded by mu
	disconnected bool // Disconnect was called; guarded by mu
	frame        []byte
	write        func(Wire) error
	code         int64
	wake         chan struct{} // made by finish when it must wait; guarded by mu
	stop         chan struct{} // resumable: closed by Disconnect
	polled       *stream       // where the request's messages go once the response ended for the client to poll; guarded by mu
	keepAliveOff bool          // keepAlive was stopped: it writes nothing more; guarded by mu
}

// wakeLocked wakes finish. Called with mu held.
func (p *postResponse) wakeLocked() {
	if p.wake != nil {
		close(p.wake)
		p.wake = nil
	}
}

// answer implements outlet.
func (p *postResponse) answer(frame []byte, write func(Wire) error, code int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answered, p.frame, p.write, p.code = true, frame, write, code
	if p.polled != nil {
		p.polled.finish(event{data: frame, write: write})
		return
	}
	p.wakeLocked()
}

// abandoned implements outlet.
func (p *postResponse) abandoned() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.abandon = true
	if p.polled != nil {
		p.polled.end()
		return
	}
	p.wakeLocked()
}

// notify implements outlet: the message goes at once, as an event.
func (p *postResponse) notify(frame []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.polled != nil {
		return p.polled.push(event{data: frame})
	}
	if p.ended || p.disconnected || !p.sse {
		return false
	}
	p.startLocked()
	if p.writeEventLocked("", frame) != nil {
		return false
	}
	_ = http.NewResponseController(p.w).Flush()
	return true
}

// disconnect implements Disconnect: true when the answer is lost.
func (p *postResponse) disconnect() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended || p.disconnected {
		return false
	}
	p.disconnected = true
	if p.stop != nil {
		close(p.stop)
	}
	p.wakeLocked()
	return p.resumable == nil
}

func (p *postResponse) startLocked() {
	if p.started {
		return
	}
	p.started = true
	startEventStream(p.w)
}

// keepAlive keeps the client's stream alive while the request is
// answered (a client or proxy that sees no byte for minutes may give
// up): every KeepAlive until the answer, the response (an event stream
// from the first one on) gets a comment line. Not for a stateless-era
// request, whose errors are HTTP statuses, nor a resumable stream (its
// pump keeps it alive). The returned stop ends it; call it once finish
// returned and before the handler does.
func (p *postResponse) keepAlive() (stop func()) {
	every := p.srv.opts.HTTP.KeepAlive
	if !p.sse || p.stateless || p.resumable != nil || every <= 0 {
		return func() {}
	}
	// A timer rather than a goroutine: most answers come first, and cost
	// only the timer. It fires on a goroutine of its own; mu orders it
	// with the answer and with stop.
	var t *time.Timer
	p.mu.Lock()
	t = time.AfterFunc(every, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.keepAliveOff || p.keepAliveLocked() != nil {
			return // stopped, or the client is gone (its context ends)
		}
		t.Reset(every)
	})
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.keepAliveOff = true
		p.mu.Unlock()
		t.Stop()
	}
}

// keepAliveLocked writes a comment line on the response, turning it
// into an event stream first. Called with mu held, before the answer.
func (p *postResponse) keepAliveLocked() error {
	if p.ended || p.answered || p.abandon || p.disconnected || p.polled != nil {
		return nil
	}
	p.startLocked()
	if _, err := io.WriteString(p.w, ": keepalive\n\n"); err != nil {
		return err
	}
	return http.NewResponseController(p.w).Flush()
}

// writeEventLocked writes one event with id (through Options.FrameHook).
func (p *postResponse) writeEventLocked(id string, frame []byte) error {
	return p.srv.http.writeEvent(p.w, id, event{data: frame})
}

// finish waits for the answer, or for the request to end without one, and
// writes the response. It returns the answer's error code (0 for a
// result; -1 when there was no answer). A write that fails in a way
// only an aborted response can tell (a FrameHook's or ReplyWith's error)
// aborts the handler.
func (p *postResponse) finish() int64 {
	if p.resumable != nil {
		return p.finishResumable()
	}
	ctx := p.r.Context()
	var poll <-chan time.Time
	if p.pollAfter > 0 {
		t := time.NewTimer(p.pollAfter)
		defer t.Stop()
		poll = t.C
	}
	p.mu.Lock()
	for !p.answered && !p.abandon && !p.disconnected {
		wake := make(chan struct{})
		p.wake = wake
		p.mu.Unlock()
		polled := false
		select {
		case <-wake:
		case <-ctx.Done():
			p.x.abandon()
		case <-poll:
			poll, polled = nil, true
		}
		p.mu.Lock()
		if polled && !p.answered && !p.abandon && !p.disconnected {
			err := p.pollLocked()
			p.ended = true
			p.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				panic(http.ErrAbortHandler)
			}
			return -1
		}
	}
	p.ended = true
	code := int64(-1)
	var err error
	switch {
	case p.answered:
		code = p.code
		if code == codeUnknown && p.frame != nil {
			code = frameErrorCode(p.frame)
		}
		err = p.writeAnswerLocked(code)
	case p.disconnected:
		if !p.started && p.sse {
			p.startLocked()
			_ = http.NewResponseController(p.w).Flush()
		}
	case !p.started:
		p.w.WriteHeader(http.StatusAccepted) // cancelled: nothing to say
	}
	p.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		panic(http.ErrAbortHandler)
	}
	return code
}

// pollLocked ends the response for the client to poll (SEP-1699): a
// stream of the session takes what the request sends from now on, and
// the response ends with a priming event that names it (an id, the retry
// field, no data). Called with mu held.
func (p *postResponse) pollLocked() error {
	st := p.x.req.Session.streams.newPost(true)
	prime := event{retry: p.srv.opts.HTTP.SSERetry}
	st.push(prime)
	p.polled = st
	p.srv.http.polled.Add(1)
	p.startLocked()
	err := p.srv.http.writeEvent(p.w, eventID(st.no, 1), prime)
	if ferr := http.NewResponseController(p.w).Flush(); err == nil {
		err = ferr
	}
	return err
}

// writeAnswerLocked writes the answer: an event, or the JSON body.
func (p *postResponse) writeAnswerLocked(code int64) error {
	status := http.StatusOK
	if p.stateless {
		status = StatelessStatus(code)
	}
	if !p.started && p.sseAnswer && status == http.StatusOK {
		p.startLocked()
	}
	if p.started {
		var err error
		if p.write != nil {
			err = p.write(&eventWire{w: p.w})
		} else {
			err = p.writeEventLocked("", p.frame)
		}
		_ = http.NewResponseController(p.w).Flush()
		return err
	}
	jw := &jsonWire{w: p.w, status: status}
	switch {
	case p.write != nil:
		if err := p.write(jw); err != nil {
			return err
		}
		return jw.Flush()
	case p.srv.opts.FrameHook != nil:
		if err := p.srv.opts.FrameHook(jw, p.frame); err != nil {
			return err
		}
		return jw.Flush()
	}
	h := p.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(p.frame)))
	p.w.WriteHeader(status)
	_, err := p.w.Write(p.frame)
	return err
}

// finishResumable writes the POST's resumable stream: the priming event,
// then (unless Disconnect came first) every event until the answer.
func (p *postResponse) finishResumable() int64 {
	p.mu.Lock()
	p.started = true
	stop := make(chan struct{})
	if p.disconnected {
		close(stop)
	}
	p.stop = stop
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.ended = true
		p.mu.Unlock()
	}()
	startEventStream(p.w)
	ctx := p.r.Context()
	if err := p.srv.http.pump(ctx, p.w, p.resumable, 0, stop, p.srv.opts.HTTP.KeepAlive, nil); err != nil && ctx.Err() == nil {
		panic(http.ErrAbortHandler)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.answered {
		return p.code
	}
	return -1
}

// resumableOutlet delivers a request's messages to its resumable POST
// stream.
type resumableOutlet struct{ p *postResponse }

func (o resumableOutlet) answer(frame []byte, write func(Wire) error, code int64) {
	o.p.mu.Lock()
	o.p.answered, o.p.code = true, code
	o.p.mu.Unlock()
	o.p.resumable.finish(event{data: frame, write: write})
}

func (o resumableOutlet) notify(frame []byte) bool { return o.p.resumable.push(event{data: frame}) }

func (o resumableOutlet) abandoned() { o.p.resumable.end() }

func (o resumableOutlet) disconnect() bool { return o.p.disconnect() }

// pump writes the events of st after number after as an event stream
// (the headers are written) until st ends and its events are written
// (nil), ctx ends, stop is closed, or a write fails. With keepalive, a
// comment line goes every keepalive while nothing else does; idle, when
// not nil, is called each time pump waits.
func (h *httpTransport) pump(ctx context.Context, w http.ResponseWriter, st *stream, after uint64, stop <-chan struct{}, keepalive time.Duration, idle func()) error {
	rc := http.NewResponseController(w)
	var tick <-chan time.Time
	if keepalive > 0 {
		t := time.NewTicker(keepalive)
		defer t.Stop()
		tick = t.C
	}
	for {
		evs, wake, done := st.since(after)
		for _, ev := range evs {
			if err := h.writeEvent(w, eventID(st.no, ev.seq), ev); err != nil {
				return err
			}
			after = ev.seq
			if ev.retry > 0 && isClosed(stop) {
				_ = rc.Flush()
				return nil // disconnected: the priming event only
			}
		}
		if len(evs) > 0 {
			if err := rc.Flush(); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
		if idle != nil {
			idle()
		}
		select {
		case <-wake:
		case <-tick:
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
				return err
			}
			if err := rc.Flush(); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return nil
		}
	}
}

func isClosed(c <-chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// writeEvent writes one event of a stream with id: the priming event,
// an answer of ReplyWith, or a message (through Options.FrameHook).
func (h *httpTransport) writeEvent(w io.Writer, id string, ev event) error {
	if ev.retry > 0 {
		return eventstream.Write(w, eventstream.Event{ID: id}, ev.retry)
	}
	ew := &eventWire{w: w, id: id}
	switch {
	case ev.write != nil:
		return ev.write(ew)
	case h.srv.opts.FrameHook != nil:
		return h.srv.opts.FrameHook(ew, ev.data)
	}
	return ew.WriteMessage(ev.data)
}

// eventWire is the Wire of an event stream: each message is an event.
type eventWire struct {
	w  io.Writer
	id string
}

func (e *eventWire) Kind() WireKind      { return WireEventData }
func (e *eventWire) Header() http.Header { return nil }

func (e *eventWire) WriteMessage(data []byte) error {
	return eventstream.Write(e.w, eventstream.Event{ID: e.id, Type: "message", Data: data}, 0)
}

func (e *eventWire) WriteBytes(b []byte) error {
	_, err := e.w.Write(b)
	return err
}

func (e *eventWire) Flush() error {
	if rw, ok := e.w.(http.ResponseWriter); ok {
		return http.NewResponseController(rw).Flush()
	}
	return nil
}

// jsonWire is the Wire of a JSON body: the header is written with the
// first byte.
type jsonWire struct {
	w      http.ResponseWriter
	status int
	wrote  bool
}

func (j *jsonWire) Kind() WireKind { return WireJSON }

func (j *jsonWire) Header() http.Header {
	if j.wrote {
		return nil
	}
	return j.w.Header()
}

func (j *jsonWire) begin() {
	if !j.wrote {
		j.wrote = true
		if j.w.Header().Get("Content-Type") == "" {
			j.w.Header().Set("Content-Type", "application/json")
		}
		j.w.WriteHeader(j.status)
	}
}

func (j *jsonWire) WriteMessage(data []byte) error {
	j.begin()
	_, err := j.w.Write(data)
	return err
}

func (j *jsonWire) WriteBytes(b []byte) error {
	j.begin()
	_, err := j.w.Write(b)
	return err
}

func (j *jsonWire) Flush() error {
	j.begin()
	return http.NewResponseController(j.w).Flush()
}
