// Package session is one MCP session over one transport connection: the
// JSON-RPC correlation table, the protocol-era negotiation, and the typed
// requests a client makes.
//
// A Session is one connection generation. The server actor creates it with
// Open, publishes it to callers while it is ready, and ends it with Close;
// nothing else opens or closes one. Callers use it directly: a call
// registers a waiter, writes its frame from the caller's goroutine, and the
// transport's read goroutine completes the waiter from the response frame.
// There is no goroutine or mailbox hand-off on the response path.
//
// When the connection ends, for whatever reason, every pending call fails
// at once with an error matching ErrConnectionClosed (or the cause given to
// Close, such as ErrServerRestarting), and later calls fail immediately.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Handler receives what the server sends on its own initiative. Its
// methods are called by the session's goroutines and must not block:
// Notification is called on the transport's read path.
type Handler interface {
	// Notification delivers a server notification other than
	// notifications/cancelled (which fails the request it names).
	Notification(method string, params json.RawMessage)

	// Closed reports the end of the connection, once, with its cause.
	Closed(err error)
}

// RequestHandler answers a server-to-client request (roots/list,
// sampling/createMessage, elicitation/create). It runs in its own
// goroutine and is given a context that ends when the session does. It
// returns a result to encode, or an error (a *protocol.Error is sent as
// is; any other error as an internal error).
type RequestHandler func(ctx context.Context, method string, params json.RawMessage) (any, error)

// DialFunc connects a transport that delivers to r.
type DialFunc func(ctx context.Context, r transports.Receiver) (transports.Conn, error)

// Options configure a session. The zero value negotiates the newest
// protocol version and declares no optional client capabilities.
type Options struct {
	// ClientInfo names the host to the server.
	ClientInfo protocol.Implementation

	// Capabilities are declared to the server (in initialize, or in every
	// stateless-era request).
	Capabilities protocol.ClientCapabilities

	// ProtocolVersion pins the version to use. Empty means the newest the
	// server supports.
	ProtocolVersion string

	// Memory carries what negotiation learned about this server from one
	// connection to the next: a server that rejected server/discover is
	// never asked again. Nil remembers nothing.
	Memory *Memory

	// DiscoverTimeout bounds the server/discover probe, so that a legacy
	// server that ignores unknown methods costs this much, not the whole
	// connect deadline. It counts from when the request was sent: over
	// Streamable HTTP, sending is the HTTP exchange, an authorization the
	// server's 401 starts included. Zero means 3 s.
	DiscoverTimeout time.Duration

	// Handler receives notifications and the end of the connection. Nil
	// drops notifications.
	Handler Handler

	// Requests answers server-to-client requests other than ping. Nil
	// answers them with method-not-found.
	Requests RequestHandler

	// Input resolves the rounds of multi round-trip requests (see
	// InputHandler). Nil resolves each input request through Requests, as
	// if the server had sent it.
	Input InputHandler

	// RequestTimeout bounds answering one server-to-client request, and
	// one round of input requests (the handler's context ends then). Zero
	// means 5 s.
	RequestTimeout time.Duration

	// LogLevel, when set, is the lowest level of log messages the
	// server is asked to send from the start (see SetLogLevel). Empty
	// asks for nothing: the server's default applies.
	LogLevel protocol.LoggingLevel

	// Logger receives diagnostics. The zero value logs nothing.
	Logger zerolog.Logger

	// Tracing records a client span for every request the session sends
	// and carries its trace context in the request's _meta (see
	// tracing.go). The zero value records nothing and adds nothing.
	Tracing Tracing
}

const (
	defaultDiscoverTimeout = 3 * time.Second
	// cancelNotifyTimeout bounds sending notifications/cancelled.
	cancelNotifyTimeout = time.Second
	// maxBadFramesInARow malformed or oversize frames with no valid frame
	// in between end the session with ErrMalformedResponse: such a
	// server does not speak the protocol. (Lines that are not JSON at all,
	// such as logs printed to stdout, are skipped and never counted.)
	maxBadFramesInARow = 32
	// replyTimeout bounds answering a server-to-client request.
	replyTimeout = 5 * time.Second
	// maxPages bounds pagination, so that a server returning cursors
	// forever cannot keep a connect running.
	maxPages = 1000
)

// Memory remembers what negotiation learned about one server, across its
// connections. The zero value knows nothing. Safe for concurrent use.
type Memory struct {
	discoverRejected atomic.Bool
}

// DiscoverRejected reports whether the server rejected server/discover.
func (m *Memory) DiscoverRejected() bool { return m != nil && m.discoverRejected.Load() }

// Forget clears what was learned, for a server whose config changed.
func (m *Memory) Forget() { m.discoverRejected.Store(false) }

// Stats counts what the session saw besides well-formed answers.
type Stats struct {
	NonProtocolLines int64 // stdout lines that were not JSON at all (skipped)
	MalformedFrames  int64 // JSON frames that were not valid JSON-RPC (skipped)
	OversizeFrames   int64 // frames over the transport's size limit (dropped)
	UnknownResponses int64 // responses to no pending call (late or bogus; dropped)
	Reissued         int64 // requests re-issued after their response stream broke (see reissue.go)
}

// Session is one negotiated MCP connection.
//
// Concurrency: every exported method is safe for concurrent use. The
// pending table and the closed state are guarded by mu; the negotiated
// fields are written by Open before the session is returned and only read
// afterwards.
type Session struct {
	opts Options
	log  zerolog.Logger

	conn     transports.Conn
	attached chan struct{} // closed once conn is set

	nextID atomic.Int64

	mu      sync.Mutex
	pending map[int64]*call // guarded by mu
	// calls recycles this session's finished calls (*call). It is the
	// session's own, not the process's: a call's channel is made by a
	// goroutine of the session's owner, so that a session inside a
	// testing/synctest bubble never waits on a channel made outside it
	// (which the bubble cannot see as durably blocked).
	calls sync.Pool
	err   error               // guarded by mu; non-nil once the session ended
	hints protocol.CacheHints // guarded by mu; see hints.go
	done  chan struct{}       // closed when err is set

	bg sync.WaitGroup // cancellation notices and request handlers in flight

	// Negotiated by Open.
	version          string
	serverInfo       protocol.Implementation
	capabilities     protocol.ServerCapabilities
	instructions     string
	discoverRejected bool
	modernMeta       protocol.Meta   // the _meta members of every stateless-era request
	modernMetaJSON   json.RawMessage // modernMeta, encoded once
	// leveled is modernMeta with the log level the host asked for
	// (SetLogLevel), once it did; see statelessMeta.
	leveled  atomic.Pointer[leveledMeta]
	logLevel atomic.Pointer[protocol.LoggingLevel] // see LogLevel
	// capsMeta is the last _meta encoded with a request's own
	// capabilities (see capsmeta.go).
	capsMeta atomic.Pointer[capsMeta]

	// paramHeaders maps a tool's name to its mirrored parameters, for the
	// tools that have some (see paramheaders.go); replaced by each
	// ListTools.
	paramHeaders atomic.Pointer[map[string][]protocol.ParamHeader]

	// readOnly holds the names of the tools whose annotations say
	// readOnlyHint (see reissue.go); replaced by each ListTools.
	readOnly atomic.Pointer[map[string]bool]
	reissued atomic.Int64 // requests re-issued after their stream broke

	nonProtocol, malformed, oversize, unknown atomic.Int64
	// badInARow counts malformed and oversize frames since the last frame
	// that decoded (see maxBadFramesInARow).
	badInARow atomic.Int64
	acks      atomic.Int64 // subscriptions/listen acknowledgements received
	listening atomic.Int64 // subscriptions/listen requests open

	// Liveness counters (see Liveness): frames decoded from the server,
	// calls that timed out, server requests being answered.
	framesIn  atomic.Uint64
	timedOut  atomic.Uint64
	abandoned atomic.Uint64
	serving   atomic.Int64

	// Streams of OpenListen (see listen.go), all guarded by mu.
	listens  map[int64]*ListenStream // open streams, by subscription id
	retired  map[int64]struct{}      // muted streams that have ended, whose late notifications are still dropped
	retiredQ []int64                 // retired, oldest first (at most maxRetired)
	anyMuted atomic.Bool             // a stream was ever muted: notifications need the subscription id check
	muted    atomic.Int64            // notifications dropped because their stream was muted
}

// call is one pending request. ch is buffered so that completing never
// blocks the read goroutine.
type call struct {
	ch chan reply
}

type reply struct {
	result json.RawMessage
	err    error
}

// newCall returns a recycled call of the session, or a new one.
func (s *Session) newCall() *call {
	if c, ok := s.calls.Get().(*call); ok {
		return c
	}
	return &call{ch: make(chan reply, 1)}
}

// Open dials the transport, negotiates the protocol era and returns a
// ready session. ctx bounds the whole negotiation. On failure the
// connection is closed (bounded by ctx) and the error says which step
// failed.
func Open(ctx context.Context, dial DialFunc, opts Options) (*Session, error) {
	s := &Session{
		opts:     opts,
		log:      opts.Logger,
		attached: make(chan struct{}),
		pending:  make(map[int64]*call),
		done:     make(chan struct{}),
	}
	conn, err := dial(ctx, s)
	if err != nil {
		return nil, err
	}
	s.conn = conn
	close(s.attached)
	if err := s.negotiate(ctx); err != nil {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		s.Close(closeCtx, err)
		return nil, err
	}
	s.initialLogLevel(ctx)
	return s, nil
}

// ProtocolVersion returns the negotiated protocol version.
func (s *Session) ProtocolVersion() string { return s.version }

// ServerInfo returns the server's self-description.
func (s *Session) ServerInfo() protocol.Implementation { return s.serverInfo }

// Capabilities returns what the server declared.
func (s *Session) Capabilities() protocol.ServerCapabilities { return s.capabilities }

// Instructions returns the server's usage instructions, if any.
func (s *Session) Instructions() string { return s.instructions }

// DiscoverRejected reports whether the server answered server/discover
// with something other than a stateless-era answer, so that the next
// connection goes straight to initialize.
func (s *Session) DiscoverRejected() bool { return s.discoverRejected }

// Conn returns the transport connection (for diagnostics such as a stdio
// server's stderr).
func (s *Session) Conn() transports.Conn { return s.conn }

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns why the session ended, or nil while it runs.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// InFlight returns the number of calls waiting for an answer, not
// counting subscriptions/listen streams.
func (s *Session) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(len(s.pending)-int(s.listening.Load()), 0)
}

// setTransportVersion tells a transport that carries the version out of
// band (HTTP headers) which version the next requests speak.
func (s *Session) setTransportVersion(version string) {
	if vs, ok := s.conn.(transports.VersionSetter); ok {
		vs.SetProtocolVersion(version)
	}
}

// Liveness is what the session saw of the server, for noticing one that
// stopped answering: counters that only grow, read together.
type Liveness struct {
	// Frames counts the frames from the server that decoded (answers,
	// notifications, requests): any of them shows it alive.
	Frames uint64
	// TimedOut counts the calls whose deadline passed before their
	// answer (sent or not: a write blocked by a server that does not
	// read counts too).
	TimedOut uint64
	// Abandoned counts the calls given up before their answer came: a
	// deadline that passed (TimedOut), a caller that cancelled, an
	// answer not given within its bound. A server that owes nothing
	// and has sent nothing since such a call is worth a probe.
	Abandoned uint64
	// Owed is the number of calls waiting for an answer (InFlight).
	Owed int
	// Serving is the number of the server's own requests the host is
	// answering: meanwhile the server may be waiting for us.
	Serving int64
}

// Liveness returns the session's liveness counters.
func (s *Session) Liveness() Liveness {
	return Liveness{Frames: s.framesIn.Load(), TimedOut: s.timedOut.Load(), Abandoned: s.abandoned.Load(),
		Owed: s.InFlight(), Serving: s.serving.Load()}
}

// Stats returns counts of what the session skipped.
func (s *Session) Stats() Stats {
	return Stats{
		NonProtocolLines: s.nonProtocol.Load(),
		MalformedFrames:  s.malformed.Load(),
		OversizeFrames:   s.oversize.Load(),
		UnknownResponses: s.unknown.Load(),
		Reissued:         s.reissued.Load(),
	}
}

// Close ends the session: every pending call fails at once with cause
// (which should match ErrConnectionClosed or ErrServerRestarting; nil
// means ErrConnectionClosed), then the transport shuts down, bounded by
// ctx. Close is idempotent.
func (s *Session) Close(ctx context.Context, cause error) error {
	if cause == nil {
		cause = ErrConnectionClosed
	} else if !errors.Is(cause, ErrConnectionClosed) && !errors.Is(cause, ErrServerRestarting) {
		cause = fmt.Errorf("%w: %w", ErrConnectionClosed, cause)
	}
	s.fail(cause)
	err := s.conn.Close(ctx)
	waited := make(chan struct{})
	go func() { s.bg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
	}
	return err
}

// fail ends the session once: it records err and fails every pending call.
func (s *Session) fail(err error) bool {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return false
	}
	s.err = err
	pending := s.pending
	s.pending = nil
	close(s.done)
	s.mu.Unlock()
	for _, c := range pending {
		c.ch <- reply{err: err}
	}
	return true
}

// Call sends a request and decodes its result into result (which may be
// nil, or a *json.RawMessage to keep it raw). It returns the server's
// *protocol.Error, a *TimeoutError, the context's error, or an error
// matching ErrConnectionClosed.
func (s *Session) Call(ctx context.Context, method string, params, result any) error {
	return s.callAnsweredWithin(ctx, 0, method, params, result)
}

// callAnsweredWithin is Call, failing with a *TimeoutError when no answer
// came within answerWithin (when positive) of the request being sent:
// how long sending takes does not count. Over Streamable HTTP, sending
// includes the HTTP exchange, and so an authorization the server's 401
// started; over the message transports it is the write alone.
func (s *Session) callAnsweredWithin(ctx context.Context, answerWithin time.Duration, method string, params, result any) error {
	raw, err := s.exchange(ctx, method, params, answerWithin)
	if err != nil {
		return err
	}
	switch r := result.(type) {
	case nil:
		return nil
	case *json.RawMessage:
		*r = raw
		return nil
	}
	if err := protocol.Unmarshal(raw, result); err != nil {
		return fmt.Errorf("%w: %s result: %v", ErrMalformedResponse, method, err)
	}
	return nil
}

// roundTrip sends a request under the next id and waits for its answer
// until ctx ends (re-issuing it once if its stream broke, see exchange).
func (s *Session) roundTrip(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return s.exchange(ctx, method, params, 0)
}

// roundTripID sends request id (from nextID; chosen by the caller for
// requests whose id must be known before they are sent) and waits for its
// answer: until ctx ends, and, when answerWithin is positive, for at most
// that long once the request is sent.
func (s *Session) roundTripID(ctx context.Context, id int64, method string, params any, answerWithin time.Duration) (json.RawMessage, error) {
	params = s.withMeta(params)
	if s.opts.Tracing.Tracer != nil {
		return s.tracedRoundTrip(ctx, id, method, params, answerWithin)
	}
	return s.send(ctx, id, method, params, answerWithin)
}

// send encodes request id with params as they are, sends it and waits for
// its answer (see roundTripID).
func (s *Session) send(ctx context.Context, id int64, method string, params any, answerWithin time.Duration) (json.RawMessage, error) {
	start := time.Now()
	var buf []byte
	if raw, ok := params.(protocol.ValidJSON); ok {
		// Sized for the envelope, so that encoding allocates once.
		buf = make([]byte, 0, len(raw)+len(method)+64)
	}
	frame, err := protocol.AppendRequest(buf, protocol.Int64ID(id), method, params)
	if err != nil {
		return nil, err
	}
	c := s.newCall()
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		s.calls.Put(c)
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	s.pending[id] = c
	s.mu.Unlock()

	if err := s.conn.Send(ctx, frame); err != nil {
		if !s.forget(id) {
			<-c.ch // completed concurrently (the session ended); drain before reuse
		}
		s.calls.Put(c)
		if errors.Is(err, transports.ErrClosed) {
			s.endOnWrite(err)
			return nil, fmt.Errorf("%s: %w", method, s.Err())
		}
		if ctx.Err() != nil {
			return nil, s.ctxError(ctx, method, start, false)
		}
		return nil, fmt.Errorf("%s: %w", method, err)
	}

	var answerTimeout <-chan time.Time
	if answerWithin > 0 {
		t := time.NewTimer(answerWithin)
		defer t.Stop()
		answerTimeout = t.C
	}
	select {
	case r := <-c.ch:
		s.calls.Put(c)
		if r.err != nil {
			return nil, fmt.Errorf("%s: %w", method, r.err)
		}
		return r.result, nil
	case <-answerTimeout:
		if !s.forget(id) {
			r := <-c.ch // the answer raced the timer and won: use it
			s.calls.Put(c)
			if r.err != nil {
				return nil, fmt.Errorf("%s: %w", method, r.err)
			}
			return r.result, nil
		}
		s.calls.Put(c)
		s.abandoned.Add(1)
		s.notifyCancelled(id, true)
		return nil, &TimeoutError{Method: method, After: time.Since(start), Sent: true}
	case <-ctx.Done():
		if !s.forget(id) {
			// The answer raced the deadline and won: use it.
			r := <-c.ch
			s.calls.Put(c)
			if r.err != nil {
				return nil, fmt.Errorf("%s: %w", method, r.err)
			}
			return r.result, nil
		}
		s.calls.Put(c)
		s.notifyCancelled(id, deadlinePassed(ctx))
		return nil, s.ctxError(ctx, method, start, true)
	}
}

// endOnWrite ends the session on a write that found the connection
// unusable (a partial frame, a closed pipe) and tells the handler: the
// reader may never see an end, since a server that stopped reading its
// input can keep its output open for ever.
func (s *Session) endOnWrite(err error) {
	if s.fail(fmt.Errorf("%w: %w", ErrConnectionClosed, err)) {
		if h := s.opts.Handler; h != nil {
			h.Closed(s.Err())
		}
	}
}

// forget removes a pending call and reports whether it was still pending.
func (s *Session) forget(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pending[id]; !ok {
		return false
	}
	delete(s.pending, id)
	return true
}

func (s *Session) ctxError(ctx context.Context, method string, start time.Time, sent bool) error {
	s.abandoned.Add(1)
	if deadlinePassed(ctx) {
		s.timedOut.Add(1)
		return &TimeoutError{Method: method, After: time.Since(start), Sent: sent}
	}
	return fmt.Errorf("%s: %w", method, context.Cause(ctx))
}

// deadlinePassed reports whether ctx ended because a deadline passed:
// its own, or one whose cause says so (a parent's deadline that can move,
// as the supervisor's default call deadline does with progress, cancels
// its children with such a cause).
func deadlinePassed(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(context.Cause(ctx), context.DeadlineExceeded)
}

// notifyCancelled tells the server, in the background and bounded in
// time, that the caller gave up on request id.
func (s *Session) notifyCancelled(id int64, timedOut bool) {
	reason := "request cancelled by the client"
	if timedOut {
		reason = "request timed out"
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		nctx, cancel := context.WithTimeout(context.Background(), cancelNotifyTimeout)
		defer cancel()
		_ = s.Notify(nctx, protocol.NotificationCancelled, protocol.CancelledParams{RequestID: protocol.Int64ID(id), Reason: reason})
	}()
}

// Notify sends a notification.
func (s *Session) Notify(ctx context.Context, method string, params any) error {
	if err := s.Err(); err != nil {
		return err
	}
	frame, err := protocol.AppendRequest(nil, protocol.ID{}, method, params)
	if err != nil {
		return err
	}
	if err := s.conn.Send(ctx, frame); err != nil {
		if errors.Is(err, transports.ErrClosed) {
			s.endOnWrite(err)
		}
		return err
	}
	return nil
}

// withMeta gives a request without params the stateless-era _meta
// members. Typed requests set their Meta with requestMeta instead; params
// passed to Call by others are sent as they are.
func (s *Session) withMeta(params any) any {
	if s.modernMeta == nil || params != nil {
		return params
	}
	return protocol.PingParams{Meta: s.statelessMeta()}
}

// requestMeta returns the _meta for a typed request: m itself in the
// handshake eras; m merged over the stateless-era members otherwise.
func (s *Session) requestMeta(m protocol.Meta) protocol.Meta {
	return s.optionsMeta(RequestOptions{Meta: m})
}

// optionsMeta returns the _meta for a typed request with options: o.Meta
// in the handshake eras; otherwise o.Meta merged over the stateless-era
// members, the client capabilities replaced by o.Capabilities when set.
func (s *Session) optionsMeta(o RequestOptions) protocol.Meta {
	if s.modernMeta == nil {
		return o.Meta
	}
	base := s.statelessMeta()
	out := make(protocol.Meta, len(base)+len(o.Meta))
	for k, v := range base {
		out[k] = v
	}
	if o.Capabilities != nil {
		if raw, err := json.Marshal(o.Capabilities); err == nil {
			out[protocol.MetaClientCapabilities] = raw
		}
	}
	for k, v := range o.Meta {
		out[k] = v
	}
	return out
}
