package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// Session is one negotiated MCP connection, as the client sees it.
//
// It is assembled from components with one job each, which it holds in
// fields (each field's comment says who owns its state). Callers use the
// requests below, and reach the listings and the subscriptions through
// Lists and Subscriptions.
//
// Concurrency: every exported method is safe for concurrent use. What
// negotiation learned (peer, meta.modern) is written by Open before the
// session is returned and only read afterwards.
type Session struct {
	// core is the correlation table and the writing of frames; its state
	// is guarded by its lock and completed from the read goroutine.
	core core
	// recv is the transports.Receiver: it runs on the transport's read
	// goroutine(s) and owns the frame counters.
	recv receiver
	// inbound answers the server's requests and input rounds, each on a
	// goroutine of its own (counted in core.bg).
	inbound serverRequests
	// peer is what the server said of itself; written by the negotiation
	// on Open's goroutine, read-only afterwards.
	peer Peer
	// meta is the stateless-era _meta of every request and the log level
	// (atomic pointers to immutable values).
	meta eraMeta
	// lists are the paginated listings and their caching hints (guarded
	// by the lists' lock).
	lists Lists
	// subs are the subscriptions/listen streams (guarded by their lock;
	// acknowledged and muted on the read goroutine).
	subs Subscriptions
	// reissue and headers keep what the last tools/list said of each
	// tool (replaced whole by each Lists.Tools, read by every call).
	reissue reissue
	headers paramHeaders
	// spans traces each request sent; immutable after Open.
	spans spans
}

// Peer is what negotiation learned of the server.
type Peer struct {
	// Version is the negotiated protocol version.
	Version string
	// Info is the server's self-description.
	Info protocol.Implementation
	// Capabilities are what the server declared.
	Capabilities protocol.ServerCapabilities
	// Instructions are the server's usage instructions, if any.
	Instructions string
	// DiscoverRejected reports whether the server answered
	// server/discover with something other than a stateless-era answer,
	// so that the next connection goes straight to initialize.
	DiscoverRejected bool
}

// Open dials the transport, negotiates the protocol era and returns a
// ready session. ctx bounds the whole negotiation. On failure the
// connection is closed (bounded by ctx) and the error says which step
// failed.
func Open(ctx context.Context, dial DialFunc, opts Options) (*Session, error) {
	timeout := opts.RequestTimeout
	if timeout <= 0 {
		timeout = replyTimeout
	}
	s := &Session{}
	s.core.log, s.core.handler = opts.Logger, opts.Handler
	s.core.attached, s.core.done = make(chan struct{}), make(chan struct{})
	s.core.pending = make(map[int64]*call)
	s.recv.s = s
	s.inbound = serverRequests{core: &s.core, requests: opts.Requests, input: opts.Input, timeout: timeout}
	s.lists.s = s
	s.subs.s = s
	s.headers.log = opts.Logger
	s.spans = spans{cfg: opts.Tracing, peer: &s.peer}
	conn, err := dial(ctx, &s.recv)
	if err != nil {
		return nil, err
	}
	s.headers.conn, s.spans.conn = conn, conn
	s.core.attach(conn)
	if err := (negotiation{s: s, opts: &opts}).run(ctx); err != nil {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		s.Close(closeCtx, err)
		return nil, err
	}
	// Options.LogLevel: a server that refuses it still serves; the
	// refusal is logged.
	if level := opts.LogLevel; level != "" {
		if err := s.SetLogLevel(ctx, level); err != nil && !errors.Is(err, ErrNoLogging) {
			s.core.log.Warn().Err(err).Str("level", string(level)).Msg("the server did not take the log level")
		}
	}
	return s, nil
}

// Peer returns what negotiation learned of the server: version, self
// description, capabilities, instructions.
func (s *Session) Peer() Peer { return s.peer }

// Conn returns the transport connection (for diagnostics such as a stdio
// server's stderr).
func (s *Session) Conn() transports.Conn { return s.core.conn }

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.core.done }

// Err returns why the session ended, or nil while it runs.
func (s *Session) Err() error { return s.core.ended() }

// InFlight returns the number of calls waiting for an answer, not
// counting subscriptions/listen streams.
func (s *Session) InFlight() int {
	return max(s.core.waiting()-int(s.subs.listening.Load()), 0)
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
	return Liveness{Frames: s.recv.framesIn.Load(), TimedOut: s.core.timedOut.Load(), Abandoned: s.core.abandoned.Load(),
		Owed: s.InFlight(), Serving: s.inbound.serving.Load()}
}

// Stats returns counts of what the session skipped.
func (s *Session) Stats() Stats {
	return Stats{
		NonProtocolLines: s.recv.nonProtocol.Load(),
		MalformedFrames:  s.recv.malformed.Load(),
		OversizeFrames:   s.recv.oversize.Load(),
		UnknownResponses: s.recv.unknown.Load(),
		Reissued:         s.reissue.count.Load(),
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
	return s.core.close(ctx, cause)
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

// roundTripID sends request id (from nextID; chosen by the caller for
// requests whose id must be known before they are sent) and waits for its
// answer: until ctx ends, and, when answerWithin is positive, for at most
// that long once the request is sent.
func (s *Session) roundTripID(ctx context.Context, id int64, method string, params any, answerWithin time.Duration) (json.RawMessage, error) {
	params = s.meta.withMeta(params)
	if s.spans.cfg.Tracer != nil {
		return s.spans.send(ctx, &s.core, id, method, params, answerWithin)
	}
	return s.core.send(ctx, id, method, params, answerWithin)
}

// Notify sends a notification.
func (s *Session) Notify(ctx context.Context, method string, params any) error {
	return s.core.notify(ctx, method, params)
}
