package mockserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The faults that concern requests and the frames written, built from
// mcpserver's seams: middleware around the catalogue (exit after N calls,
// hang, latency, a crash in the middle of an answer, a slow start,
// sessions that expire, streams dropped or cut, the arming of the 503
// burst), a hook around every frame written (garbage, silence), and
// answers written on the wire by hand (oversize frames, the crash's half
// answer). The faults of the HTTP transports themselves (401, 503 bursts,
// a slow first byte, a server that hangs) wrap the HTTP handler (http.go).

// faultState is what the faults count. mu guards it.
type faultState struct {
	mu      sync.Mutex
	armed   bool                       // an initialize or server/discover came in (HTTP5xx)
	burst   int                        // 503s still to send once armed
	cuts    int                        // answers lost so far (CutStreams)
	perSess map[*mcpserver.Session]int // tools/call received, per session (ExpireSessionAfter)
	forget  map[*mcpserver.Session]func()
	listed  int // requests of FailListMethod received (FailLists)
}

// Garbage is what the Garbage fault writes before each message: a line
// that is not JSON and a frame cut short.
const (
	garbageLine  = "mockserver: this line is not JSON"
	garbageFrame = `{"jsonrpc":"2.0","id":`
)

// errCrashed ends the connection whose answer CrashMidResponse cut.
var errCrashed = errors.New("mockserver: the server crashed in the middle of an answer")

// middleware returns the fault middleware Options ask for (none for a
// well-behaved server: the lean path stays lean).
func (s *server) middleware() []mcpserver.Middleware {
	o := s.o
	var mws []mcpserver.Middleware
	if o.HTTP5xx > 0 {
		mws = append(mws, onMethods(s.arm, protocol.MethodInitialize, protocol.MethodDiscover))
	}
	if o.ExpireSessionAfter > 0 {
		mws = append(mws, s.expireSessions)
	}
	if o.FailLists > 0 {
		mws = append(mws, s.failLists)
	}
	if o.DropStream {
		mws = append(mws, dropStream)
	}
	if o.CutStreams > 0 {
		mws = append(mws, s.cutStreams)
	}
	if o.ListenCut > 0 {
		mws = append(mws, s.cutListens)
	}
	if o.InitDelay > 0 {
		mws = append(mws, s.delayStart)
	}
	if o.MuteOnCall > 0 {
		mws = append(mws, s.dropWhenMuted)
	}
	if o.ExitAfter > 0 || o.MuteOnCall > 0 || o.StallOnCall > 0 || o.HangOnCall || o.CrashMidResponse || o.Latency > 0 {
		mws = append(mws, s.callFaults)
	}
	return mws
}

// onMethods is a middleware that calls f before it passes on the requests
// of methods.
func onMethods(f func(), methods ...string) mcpserver.Middleware {
	return func(next mcpserver.Handler) mcpserver.Handler {
		return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
			for _, m := range methods {
				if r.Method == m {
					f()
					break
				}
			}
			next.ServeMCP(ctx, w, r)
		})
	}
}

// arm starts the 503 burst (HTTP5xx) at the first initialize or
// server/discover, before it is answered.
func (s *server) arm() {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if !s.faults.armed {
		s.faults.armed = true
		s.faults.burst = s.o.HTTP5xx
	}
}

// takeBurst reports whether this POST is one of the burst's 503s.
func (s *server) takeBurst() bool {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if s.faults.armed && s.faults.burst > 0 {
		s.faults.burst--
		return true
	}
	return false
}

// failLists answers the first FailLists requests of FailListMethod
// (default tools/list) with an internal error; the connection stays up.
func (s *server) failLists(next mcpserver.Handler) mcpserver.Handler {
	method := s.o.FailListMethod
	if method == "" {
		method = protocol.MethodToolsList
	}
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if r.Method != method {
			next.ServeMCP(ctx, w, r)
			return
		}
		s.faults.mu.Lock()
		s.faults.listed++
		n := s.faults.listed
		s.faults.mu.Unlock()
		if n > s.o.FailLists {
			next.ServeMCP(ctx, w, r)
			return
		}
		w.Error(protocol.NewError(protocol.CodeInternalError, "mockserver: %s fails (%d of %d, as configured)", method, n, s.o.FailLists))
	})
}

// expireSessions forgets a session once it has answered
// ExpireSessionAfter tools/call: its next request gets 404 (the legacy
// HTTP+SSE transport's session ends after the answer).
func (s *server) expireSessions(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		sess := r.Session
		if r.Method != protocol.MethodToolsCall || (sess.ID() == "" && !s.isLegacy(sess)) {
			next.ServeMCP(ctx, w, r)
			return
		}
		s.faults.mu.Lock()
		if s.faults.perSess == nil {
			s.faults.perSess = map[*mcpserver.Session]int{}
		}
		s.faults.perSess[sess]++
		expire := s.faults.perSess[sess] == s.o.ExpireSessionAfter
		forget := s.faults.forget[sess]
		s.faults.mu.Unlock()
		if expire && forget != nil {
			forget() // a legacy session is unknown before its answer is out
		}
		next.ServeMCP(ctx, w, r)
		if expire {
			sess.Expire()
		}
	})
}

// isLegacy reports whether sess is a legacy HTTP+SSE session.
func (s *server) isLegacy(sess *mcpserver.Session) bool {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	_, ok := s.faults.forget[sess]
	return ok
}

// onLegacySession registers how a legacy HTTP+SSE session is forgotten,
// for ExpireSessionAfter; done undoes it.
func (s *server) onLegacySession(sess *mcpserver.Session, forget func()) (done func()) {
	s.faults.mu.Lock()
	if s.faults.forget == nil {
		s.faults.forget = map[*mcpserver.Session]func(){}
	}
	s.faults.forget[sess] = forget
	s.faults.mu.Unlock()
	return func() {
		s.faults.mu.Lock()
		delete(s.faults.forget, sess)
		delete(s.faults.perSess, sess)
		s.faults.mu.Unlock()
	}
}

// dropStream ends the event stream of a tools/call after its priming
// event (DropStream, with SSEResponses): in a session the answer waits
// for a GET with Last-Event-ID; a stateless-era one is lost.
func dropStream(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if d, ok := w.(mcpserver.Disconnecter); ok && r.Method == protocol.MethodToolsCall {
			d.Disconnect()
		}
		next.ServeMCP(ctx, w, r)
	})
}

// errStreamCut aborts the response of a request whose answer CutStreams
// loses.
var errStreamCut = errors.New("mockserver: the response breaks before its answer, as configured")

// cutStreams loses the answers of the first CutStreams stateless-era HTTP
// requests (of CutMethod, if set) other than server/discover: each is
// processed, then its response breaks before the answer: with
// SSEResponses the event stream ends without it, otherwise the connection
// closes before any response (2026-07-28 has no resumption).
func (s *server) cutStreams(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if r.Header == nil || !r.Modern() || r.Session.ID() != "" || r.Method == protocol.MethodDiscover ||
			(s.o.CutMethod != "" && s.o.CutMethod != r.Method) || !s.takeCut() {
			next.ServeMCP(ctx, w, r)
			return
		}
		_ = capture(ctx, next, w, r) // processed; the answer is lost
		if d, ok := w.(mcpserver.Disconnecter); ok && s.o.SSEResponses {
			d.Disconnect()
			return
		}
		w.ReplyWith(func(mcpserver.Wire) error { return errStreamCut })
	})
}

// takeCut reports whether this request's answer is one CutStreams
// loses, counting it.
func (s *server) takeCut() bool {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if s.faults.cuts >= s.o.CutStreams {
		return false
	}
	s.faults.cuts++
	return true
}

// cutListens cuts the subscriptions/listen streams of HTTP after
// ListenCut, without a response.
func (s *server) cutListens(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if d, ok := w.(mcpserver.Disconnecter); ok && r.Method == protocol.MethodSubscriptionsListen {
			t := time.AfterFunc(s.o.ListenCut, d.Disconnect)
			context.AfterFunc(ctx, func() { t.Stop() })
		}
		next.ServeMCP(ctx, w, r)
	})
}

// delayStart answers initialize and server/discover once InitDelay has
// passed since the first of them came: the server takes InitDelay to
// start, once (a client that falls back from server/discover to
// initialize waits InitDelay in all, not twice).
func (s *server) delayStart(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if r.Method != protocol.MethodInitialize && r.Method != protocol.MethodDiscover {
			next.ServeMCP(ctx, w, r)
			return
		}
		s.startOnce.Do(func() { s.startedAt = time.Now() })
		s.later(func() {
			time.Sleep(time.Until(s.startedAt.Add(s.o.InitDelay)))
			next.ServeMCP(ctx, w, r)
		})
	})
}

// dropWhenMuted leaves every request unanswered once MuteOnCall was
// reached, ping included (notifications are still read and handled).
func (s *server) dropWhenMuted(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if !s.muted.Load() {
			next.ServeMCP(ctx, w, r)
		}
	})
}

// callFaults are the faults of tools/call: MuteOnCall (from that call
// on, nothing is answered), StallOnCall (from that call on, the input is
// no longer read: the goroutine that reads it sleeps for good; over HTTP
// the request never ends), ExitAfter (the server exits
// on receiving call ExitAfter+1), HangOnCall (never answers),
// CrashMidResponse (after Latency, half the answer, then the server
// dies) and Latency (the answer comes that much later).
func (s *server) callFaults(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if r.Method != protocol.MethodToolsCall {
			next.ServeMCP(ctx, w, r)
			return
		}
		n := s.calls.Add(1)
		if s.o.MuteOnCall > 0 && n >= int64(s.o.MuteOnCall) {
			s.muted.Store(true)
			stderrf("silent from tools/call %d on, as configured", n)
			return
		}
		if s.o.StallOnCall > 0 && n >= int64(s.o.StallOnCall) {
			r.Session.Flush()
			stderrf("no longer reading input from tools/call %d on, as configured", n)
			for { // with Options.Inline this goroutine reads the connection
				time.Sleep(time.Hour) // (a sleep, not select{}: the runtime would call that a deadlock)
			}
		}
		if s.o.ExitAfter > 0 && n > int64(s.o.ExitAfter) {
			stderrf("exiting after %d calls as configured", s.o.ExitAfter)
			s.die(exitAfterCalls)
			return
		}
		switch {
		case s.o.HangOnCall:
		case s.o.CrashMidResponse:
			s.later(func() {
				time.Sleep(s.o.Latency)
				answer := capture(ctx, next, w, r)
				w.ReplyWith(s.crash(answer))
			})
		case s.o.Latency > 0:
			s.later(func() {
				time.Sleep(s.o.Latency)
				next.ServeMCP(ctx, w, r)
			})
		default:
			next.ServeMCP(ctx, w, r)
		}
	})
}

// crash writes the first half of answer, as a server dying in the middle
// of a write would on each transport, and kills the server: over stdio
// half a line; as a JSON body a Content-Length that counts the whole
// answer with half of it; as an event the answer's data line stopping
// halfway; over WebSocket a frame header that announces the whole answer
// with half its payload; over HTTP+SSE the answer's event stopping
// halfway.
func (s *server) crash(answer []byte) func(mcpserver.Wire) error {
	return func(w mcpserver.Wire) error {
		half := answer[:len(answer)/2]
		stderrf("crashing in the middle of an answer as configured")
		var err error
		switch w.Kind() {
		case mcpserver.WireJSON:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
			err = w.WriteBytes(half)
		case mcpserver.WireEventData:
			err = w.WriteBytes(append([]byte("data: "), half...))
		case mcpserver.WireConn:
			if s.o.Transport == TransportWS {
				err = w.WriteBytes(append(wsFrameHeader(len(answer)), half...))
			} else {
				err = w.WriteBytes(append([]byte("event: message\ndata: "), half...))
			}
		default:
			err = w.WriteBytes(half)
		}
		if err == nil {
			err = w.Flush()
		}
		s.die(exitCrash)
		return errors.Join(errCrashed, err)
	}
}

// wsFrameHeader is the header of an unfragmented WebSocket text frame of
// n bytes (RFC 6455 §5.2: FIN and opcode 1; a server does not mask).
func wsFrameHeader(n int) []byte {
	head := []byte{0x81}
	switch {
	case n < 126:
		return append(head, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(head, 126), uint16(n))
	}
	return binary.BigEndian.AppendUint64(append(head, 127), uint64(n))
}

// frameHook returns the hook of the faults that concern every frame
// written: Garbage (a line that is not JSON and a frame cut short before
// each message) and Silent (nothing is written at all).
func (s *server) frameHook() func(mcpserver.Wire, []byte) error {
	switch {
	case s.o.Silent:
		return func(mcpserver.Wire, []byte) error { return nil }
	case s.o.Garbage:
		return func(w mcpserver.Wire, frame []byte) error {
			var err error
			switch w.Kind() {
			case mcpserver.WireJSON:
				err = w.WriteBytes([]byte(garbageLine + "\n" + garbageFrame + "\n"))
			case mcpserver.WireEventData:
				err = w.WriteMessage([]byte(garbageLine))
			default:
				if err = w.WriteMessage([]byte(garbageLine)); err == nil {
					err = w.WriteMessage([]byte(garbageFrame))
				}
			}
			if err != nil {
				return err
			}
			return w.WriteMessage(frame)
		}
	}
	return nil
}

// oversizeAnswer writes a response to id of at least size bytes
// (OversizeBytes), as it is made rather than built in memory where the
// transport allows.
func oversizeAnswer(id protocol.ID, size int64) func(mcpserver.Wire) error {
	return func(w mcpserver.Wire) error {
		raw := wireBytes{w}
		switch w.Kind() {
		case mcpserver.WireJSON:
			w.Header().Set("Content-Type", "application/json")
			return writeOversize(raw, id, size)
		case mcpserver.WireEventData:
			if err := w.WriteBytes([]byte("event: message\ndata: ")); err != nil {
				return err
			}
			if err := writeOversize(raw, id, size); err != nil {
				return err
			}
			return w.WriteBytes([]byte("\n\n"))
		case mcpserver.WireConn:
			var b bytes.Buffer
			_ = writeOversize(&b, id, size)
			return w.WriteMessage(b.Bytes())
		}
		if err := writeOversize(raw, id, size); err != nil {
			return err
		}
		return w.WriteBytes([]byte("\n"))
	}
}

// wireBytes writes to a Wire outside its framing.
type wireBytes struct{ w mcpserver.Wire }

func (b wireBytes) Write(p []byte) (int, error) {
	if err := b.w.WriteBytes(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeOversize writes a response to id of at least size bytes (no
// newline).
func writeOversize(w io.Writer, id protocol.ID, size int64) error {
	idJSON, _ := id.MarshalJSON()
	head := `{"jsonrpc":"2.0","id":` + string(idJSON) + `,"result":{"content":[{"type":"text","text":"`
	if _, err := io.WriteString(w, head); err != nil {
		return err
	}
	chunk := []byte(strings.Repeat("o", 64<<10))
	for n := int64(len(head)); n < size; n += int64(len(chunk)) {
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, `"}]}}`)
	return err
}

// capture runs next for r and returns the answer it gives (waiting for
// it: the sleep tool answers from another goroutine), encoded; its
// notifications and requests to the client go through w.
func capture(ctx context.Context, next mcpserver.Handler, w mcpserver.ResponseWriter, r *mcpserver.Request) []byte {
	c := &captured{ResponseWriter: w, id: r.ID, got: make(chan []byte, 1)}
	next.ServeMCP(ctx, c, r)
	return <-c.got
}

// captured is a ResponseWriter that keeps the answer it is given.
type captured struct {
	mcpserver.ResponseWriter
	id   protocol.ID
	got  chan []byte // buffered 1
	once sync.Once
}

func (c *captured) keep(frame []byte) { c.once.Do(func() { c.got <- frame }) }

func (c *captured) Reply(result any) {
	frame, err := protocol.AppendResult(nil, c.id, result)
	if err != nil {
		frame, _ = protocol.AppendError(nil, c.id, protocol.NewError(protocol.CodeInternalError, "%v", err))
	}
	c.keep(frame)
}

func (c *captured) Error(e *protocol.Error) {
	frame, _ := protocol.AppendError(nil, c.id, e)
	c.keep(frame)
}

func (c *captured) WriteFrame(frame []byte) { c.keep(frame) }

func (c *captured) ReplyWith(write func(mcpserver.Wire) error) {
	var b bytes.Buffer
	_ = write(bufferWire{&b})
	c.keep(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// bufferWire is a stdio-like Wire into a buffer.
type bufferWire struct{ b *bytes.Buffer }

func (w bufferWire) Kind() mcpserver.WireKind { return mcpserver.WireStdio }
func (w bufferWire) WriteMessage(data []byte) error {
	w.b.Write(data)
	return w.b.WriteByte('\n')
}
func (w bufferWire) WriteBytes(b []byte) error { _, err := w.b.Write(b); return err }
func (w bufferWire) Flush() error              { return nil }
func (w bufferWire) Header() http.Header       { return nil }
