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
	"sync/atomic"
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

// faults is the server's part that misbehaves on purpose: the fault
// middleware and frame hook it hands mcpserver, and what they count. The
// counters are guarded by mu; calls and muted are atomics; startedAt is
// written once, in startOnce, which every reader passes first. o, die and
// later are set by newServer and never change.
type faults struct {
	o     *Options
	die   func(code int) // the server's exit fault (server.die)
	later func(f func()) // an answer given later (server.later)

	calls atomic.Int64 // tools/call received, for ExitAfter, MuteOnCall and StallOnCall
	muted atomic.Bool  // MuteOnCall reached: nothing is answered

	// startedAt is when the first initialize or server/discover came (the
	// server's start-up, InitDelay, runs from then).
	startOnce sync.Once
	startedAt time.Time

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
func (f *faults) middleware() []mcpserver.Middleware {
	o := f.o
	var mws []mcpserver.Middleware
	if o.HTTP5xx > 0 {
		mws = append(mws, onMethods(f.arm, protocol.MethodInitialize, protocol.MethodDiscover))
	}
	if o.ExpireSessionAfter > 0 {
		mws = append(mws, f.expireSessions)
	}
	if o.FailLists > 0 {
		mws = append(mws, f.failLists)
	}
	if o.DropStream {
		mws = append(mws, dropStream)
	}
	if o.CutStreams > 0 {
		mws = append(mws, f.cutStreams)
	}
	if o.ListenCut > 0 {
		mws = append(mws, f.cutListens)
	}
	if o.InitDelay > 0 {
		mws = append(mws, f.delayStart)
	}
	if o.MuteOnCall > 0 {
		mws = append(mws, f.dropWhenMuted)
	}
	if o.ExitAfter > 0 || o.MuteOnCall > 0 || o.StallOnCall > 0 || o.HangOnCall || o.CrashMidResponse || o.Latency > 0 {
		mws = append(mws, f.callFaults)
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
func (f *faults) arm() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed {
		f.armed = true
		f.burst = f.o.HTTP5xx
	}
}

// takeBurst reports whether this POST is one of the burst's 503s.
func (f *faults) takeBurst() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armed && f.burst > 0 {
		f.burst--
		return true
	}
	return false
}

// failLists answers the first FailLists requests of FailListMethod
// (default tools/list) with an internal error; the connection stays up.
func (f *faults) failLists(next mcpserver.Handler) mcpserver.Handler {
	method := f.o.FailListMethod
	if method == "" {
		method = protocol.MethodToolsList
	}
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if r.Method != method {
			next.ServeMCP(ctx, w, r)
			return
		}
		f.mu.Lock()
		f.listed++
		n := f.listed
		f.mu.Unlock()
		if n > f.o.FailLists {
			next.ServeMCP(ctx, w, r)
			return
		}
		w.Error(protocol.NewError(protocol.CodeInternalError, "mockserver: %s fails (%d of %d, as configured)", method, n, f.o.FailLists))
	})
}

// expireSessions forgets a session once it has answered
// ExpireSessionAfter tools/call: its next request gets 404 (the legacy
// HTTP+SSE transport's session ends after the answer).
func (f *faults) expireSessions(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		sess := r.Session
		if r.Method != protocol.MethodToolsCall || (sess.ID() == "" && !f.isLegacy(sess)) {
			next.ServeMCP(ctx, w, r)
			return
		}
		f.mu.Lock()
		if f.perSess == nil {
			f.perSess = map[*mcpserver.Session]int{}
		}
		f.perSess[sess]++
		expire := f.perSess[sess] == f.o.ExpireSessionAfter
		forget := f.forget[sess]
		f.mu.Unlock()
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
func (f *faults) isLegacy(sess *mcpserver.Session) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.forget[sess]
	return ok
}

// onLegacySession registers how a legacy HTTP+SSE session is forgotten,
// for ExpireSessionAfter; done undoes it.
func (f *faults) onLegacySession(sess *mcpserver.Session, forget func()) (done func()) {
	f.mu.Lock()
	if f.forget == nil {
		f.forget = map[*mcpserver.Session]func(){}
	}
	f.forget[sess] = forget
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		delete(f.forget, sess)
		delete(f.perSess, sess)
		f.mu.Unlock()
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
func (f *faults) cutStreams(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if r.Header == nil || !r.Modern() || r.Session.ID() != "" || r.Method == protocol.MethodDiscover ||
			(f.o.CutMethod != "" && f.o.CutMethod != r.Method) || !f.takeCut() {
			next.ServeMCP(ctx, w, r)
			return
		}
		_ = capture(ctx, next, w, r) // processed; the answer is lost
		if d, ok := w.(mcpserver.Disconnecter); ok && f.o.SSEResponses {
			d.Disconnect()
			return
		}
		w.ReplyWith(func(mcpserver.Wire) error { return errStreamCut })
	})
}

// takeCut reports whether this request's answer is one CutStreams
// loses, counting it.
func (f *faults) takeCut() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cuts >= f.o.CutStreams {
		return false
	}
	f.cuts++
	return true
}

// cutListens cuts the subscriptions/listen streams of HTTP after
// ListenCut, without a response.
func (f *faults) cutListens(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if d, ok := w.(mcpserver.Disconnecter); ok && r.Method == protocol.MethodSubscriptionsListen {
			t := time.AfterFunc(f.o.ListenCut, d.Disconnect)
			context.AfterFunc(ctx, func() { t.Stop() })
		}
		next.ServeMCP(ctx, w, r)
	})
}

// delayStart answers initialize and server/discover once InitDelay has
// passed since the first of them came: the server takes InitDelay to
// start, once (a client that falls back from server/discover to
// initialize waits InitDelay in all, not twice).
func (f *faults) delayStart(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if r.Method != protocol.MethodInitialize && r.Method != protocol.MethodDiscover {
			next.ServeMCP(ctx, w, r)
			return
		}
		f.startOnce.Do(func() { f.startedAt = time.Now() })
		f.later(func() {
			time.Sleep(time.Until(f.startedAt.Add(f.o.InitDelay)))
			next.ServeMCP(ctx, w, r)
		})
	})
}

// dropWhenMuted leaves every request unanswered once MuteOnCall was
// reached, ping included (notifications are still read and handled).
func (f *faults) dropWhenMuted(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if !f.muted.Load() {
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
func (f *faults) callFaults(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if r.Method != protocol.MethodToolsCall {
			next.ServeMCP(ctx, w, r)
			return
		}
		n := f.calls.Add(1)
		if f.o.MuteOnCall > 0 && n >= int64(f.o.MuteOnCall) {
			f.muted.Store(true)
			stderrf("silent from tools/call %d on, as configured", n)
			return
		}
		if f.o.StallOnCall > 0 && n >= int64(f.o.StallOnCall) {
			r.Session.Flush()
			stderrf("no longer reading input from tools/call %d on, as configured", n)
			for { // with Options.Inline this goroutine reads the connection
				time.Sleep(time.Hour) // (a sleep, not select{}: the runtime would call that a deadlock)
			}
		}
		if f.o.ExitAfter > 0 && n > int64(f.o.ExitAfter) {
			stderrf("exiting after %d calls as configured", f.o.ExitAfter)
			f.die(exitAfterCalls)
			return
		}
		switch {
		case f.o.HangOnCall:
		case f.o.CrashMidResponse:
			f.later(func() {
				time.Sleep(f.o.Latency)
				answer := capture(ctx, next, w, r)
				w.ReplyWith(f.crash(answer))
			})
		case f.o.Latency > 0:
			f.later(func() {
				time.Sleep(f.o.Latency)
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
func (f *faults) crash(answer []byte) func(mcpserver.Wire) error {
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
			if f.o.Transport == TransportWS {
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
		f.die(exitCrash)
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
func (f *faults) frameHook() func(mcpserver.Wire, []byte) error {
	switch {
	case f.o.Silent:
		return func(mcpserver.Wire, []byte) error { return nil }
	case f.o.Garbage:
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
