package gateway

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// SSE polling (SEP-1699, 2025-11-25): a long call's POST response is an
// event stream that the gateway closes once the call has run for
// Options.SSEPollAfter, after a priming event that carries an id and a
// retry field; the call goes on, and what it sends from then on (its
// answer, its progress) waits in the session for the client, which
// resumes the stream with a GET and Last-Event-ID. So no HTTP response
// stays open for the length of a long call (proxies and load balancers
// cut idle ones), and a client that lost the response can resume it.
//
// It applies to the tools/call of a handshake-era HTTP session that
// negotiated 2025-11-25 or later (earlier clients cannot resume a POST
// stream) and whose POST accepts an event stream.

// DefaultSSERetry is Options.SSERetry's zero value: how long the client
// is told to wait before it resumes.
const DefaultSSERetry = time.Second

// SuggestedSSEPollAfter is a sane Options.SSEPollAfter for a gateway
// behind a proxy that cuts responses idle for a minute. Polling is off by
// default because a call that may be polled runs on a goroutine of its
// own, which costs every call a hand-off (10–15 µs of the gateway's CPU
// per call on the 2-core VM of docs/protocol.md), whether it is polled or
// not.
const SuggestedSSEPollAfter = 30 * time.Second

// pollVersion is the first protocol version whose clients resume POST
// streams.
const pollVersion = protocol.Version20251125

// pollIDPrefix starts the event ids of polled streams ("p<n>-<i>"); the
// session's standalone stream numbers its events with digits only.
const pollIDPrefix = "p"

// pollStream is what a polled call sends after its response closed,
// kept until the client has resumed and read the answer.
//
// Concurrency: the call's goroutine pushes, GET streams read; mu guards
// the fields after id.
type pollStream struct {
	id uint64 // the session's number for it

	mu       sync.Mutex
	frames   [][]byte // events 1 … len(frames)+dropped, the newest kept
	dropped  int      // the oldest events dropped beyond the bound
	answered bool     // the answer is the last frame
	wake     chan struct{}
}

// push adds an event (last: the call's answer) and wakes the readers.
func (p *pollStream) push(frame []byte, last bool, bound int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.answered {
		return
	}
	if len(p.frames) >= bound && !last {
		p.frames = p.frames[1:]
		p.dropped++
	}
	p.frames = append(p.frames, frame)
	p.answered = last
	close(p.wake)
	p.wake = make(chan struct{})
}

// since returns the events after number after (from 1), the number of
// the first, whether the answer is among what exists, and a channel
// closed on the next push.
func (p *pollStream) since(after int) (frames [][]byte, first int, answered bool, wake <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	oldest := p.dropped + 1
	after = max(after, oldest-1)
	if i := after - p.dropped; i < len(p.frames) {
		frames = p.frames[i:]
	}
	return frames, after + 1, p.answered, p.wake
}

// pollAfter is how long a call runs before its response is closed (0:
// never).
func (g *Gateway) pollAfter() time.Duration {
	return max(g.opts.SSEPollAfter, 0)
}

func (g *Gateway) sseRetry() time.Duration {
	if g.opts.SSERetry > 0 {
		return g.opts.SSERetry
	}
	return DefaultSSERetry
}

// polled reports whether request m of s, answered on st, may be polled.
func (g *Gateway) polled(s *session, m *protocol.Message, st *reqStream) bool {
	if g.pollAfter() == 0 || m.Method != protocol.MethodToolsCall || s.id == "" || s.out == nil || !st.sse {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.modern && s.version >= pollVersion
}

// polledAnswer is a polled call's answer, or nothing when it went to its
// poll stream.
type polledAnswer struct {
	frame []byte
	code  int64
}

// servePolled serves request m of s on a goroutine of its own, and
// answers on st if the answer comes within pollAfter; otherwise it
// closes st after a priming event, and the answer goes to a poll stream
// of the session. The call ends with the session, or when the client
// goes away before the poll.
func (g *Gateway) servePolled(r *http.Request, s *session, m *protocol.Message, st *reqStream) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	answer := make(chan polledAnswer, 1)
	go func() {
		defer cancel()
		frame, code := s.handle(ctx, m, st.notify)
		if !st.polledAnswer(frame) {
			answer <- polledAnswer{frame, code}
		}
	}()
	t := time.NewTimer(g.pollAfter())
	defer t.Stop()
	select {
	case a := <-answer:
		st.finish(a.frame, http.StatusOK)
		return
	case <-r.Context().Done():
		// The client went away before the poll: the call is cancelled.
		cancel()
		st.finish(nil, http.StatusOK)
		return
	case <-t.C:
	case <-s.done:
	}
	p := s.openPoll()
	if p == nil || !st.poll(p, g.sseRetry(), g.opts.OutboxSize) {
		// The session closed, or the answer came meanwhile.
		if p != nil {
			s.closePoll(p)
		}
		a := <-answer
		st.finish(a.frame, http.StatusOK)
		return
	}
	g.metrics.polls.Add(1)
}

// polledAnswer hands a polled call's answer to its poll stream; false
// when the response was not closed (the POST answers).
func (st *reqStream) polledAnswer(frame []byte) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.polling == nil {
		st.answered = true
		return false
	}
	if frame == nil {
		frame = []byte{} // cancelled: the stream ends without an answer
	}
	st.polling.push(frame, true, st.bound)
	return true
}

// poll ends the POST response with a priming event (an id and retry)
// and sends what the call sends from then on to p; false when the
// answer came first.
func (st *reqStream) poll(p *pollStream, retry time.Duration, bound int) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.answered || st.done {
		return false
	}
	st.startLocked()
	_, _ = io.WriteString(st.w, "id: "+pollEventID(p.id, 0)+"\nretry: "+strconv.FormatInt(retry.Milliseconds(), 10)+"\ndata: \n\n")
	flush(st.w)
	st.polling, st.bound, st.done = p, bound, true
	return true
}

// pollEventID is the id of event i (0: the priming event) of poll stream
// n.
func pollEventID(n uint64, i int) string {
	return pollIDPrefix + strconv.FormatUint(n, 10) + "-" + strconv.Itoa(i)
}

// parsePollEventID reads an id of pollEventID.
func parsePollEventID(id string) (n uint64, i int, ok bool) {
	rest, ok := strings.CutPrefix(id, pollIDPrefix)
	if !ok {
		return 0, 0, false
	}
	ns, is, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, 0, false
	}
	n, err1 := strconv.ParseUint(ns, 10, 64)
	i, err2 := strconv.Atoi(is)
	if err1 != nil || err2 != nil || i < 0 {
		return 0, 0, false
	}
	return n, i, true
}

// openPoll registers a new poll stream in s; nil once s closed.
func (s *session) openPoll() *pollStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.pollSeq++
	p := &pollStream{id: s.pollSeq, wake: make(chan struct{})}
	if s.polls == nil {
		s.polls = map[uint64]*pollStream{}
	}
	s.polls[p.id] = p
	return p
}

// pollStream returns poll stream n of s, if it is kept.
func (s *session) pollStream(n uint64) *pollStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls[n]
}

// closePoll forgets p: its answer was read.
func (s *session) closePoll(p *pollStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.polls[p.id] == p {
		delete(s.polls, p.id)
	}
}

// servePollResume is a GET with the Last-Event-ID of poll stream n: the
// events after i, then the answer, and the stream ends.
func (g *Gateway) servePollResume(w http.ResponseWriter, r *http.Request, s *session, n uint64, after int) {
	p := s.pollStream(n)
	if p == nil {
		httpError(w, http.StatusNotFound, "no stream to resume with Last-Event-ID "+pollEventID(n, after)+" (its answer was read, or the session forgot it)")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flush(w)
	keepalive := time.NewTicker(25 * time.Second)
	defer keepalive.Stop()
	for {
		frames, first, answered, wake := p.since(after)
		for k, f := range frames {
			if len(f) > 0 {
				writeEvent(w, pollEventID(n, first+k), f)
			}
		}
		if len(frames) > 0 {
			after = first + len(frames) - 1
			flush(w)
		}
		if answered {
			s.closePoll(p)
			return
		}
		s.touch()
		select {
		case <-wake:
		case <-keepalive.C:
			_, _ = io.WriteString(w, ": keepalive\n\n")
			flush(w)
		case <-s.done:
			return
		case <-r.Context().Done():
			return
		}
	}
}
