package mcpserver

import (
	"context"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Options configure a Server. The zero value serves every protocol
// version with a Handler that knows no method.
type Options struct {
	// Info is the serverInfo of initialize and server/discover.
	Info protocol.Implementation
	// Instructions, when set, go in the initialize and server/discover
	// results.
	Instructions string
	// Versions are the protocol versions served, newest first (default:
	// every version the protocol package knows).
	Versions []string
	// Capabilities returns the capabilities declared in answer to r (an
	// initialize or a server/discover). Nil declares tools with
	// listChanged.
	Capabilities func(r *Request) protocol.ServerCapabilities
	// Handler serves every request the Server does not answer itself
	// (default MethodNotFound).
	Handler Handler
	// Middleware wraps the dispatch of every request, the Server's own
	// methods (initialize, server/discover, ping, logging/setLevel,
	// subscriptions/listen) included, after its era was checked. The
	// first wraps the others.
	Middleware []Middleware
	// FrameHook, when set, writes every message the server sends (answers,
	// notifications, requests to the client) in place of the transport:
	// a plain hook calls w.WriteMessage(frame). An error it returns ends
	// the connection (over HTTP, the response is aborted).
	FrameHook func(w Wire, frame []byte) error
	// Subscriptions decides which part of a subscriptions/listen filter
	// the server agrees to, and may take what the listen stream needs
	// (release, when not nil, is called once when it ends). Nil agrees to
	// the whole filter.
	Subscriptions func(ctx context.Context, r *Request, want protocol.NotificationSubscriptions) (agreed protocol.NotificationSubscriptions, release func())
	// ModernResult, when set, rewrites the result of every request of the
	// stateless era answered with Reply (not WriteFrame or ReplyWith)
	// before it is encoded, the Server's own server/discover included:
	// e.g. to add resultType and caching hints (see CacheableResult).
	ModernResult func(r *Request, result any) any
	// RequireInitialized refuses the requests of a handshake-era session
	// other than ping with -32600 until the client has sent
	// notifications/initialized. Without it, a session may send requests
	// once initialize is answered.
	RequireInitialized bool
	// Inline dispatches the requests of a connection (ServeStdio,
	// ServeConn) on the goroutine that reads it, in order: a Handler that
	// must wait answers later from a goroutine of its own, and the ctx it
	// is given is the connection's (notifications/cancelled does not end
	// it; the Server still drops the answer to a cancelled request).
	// Without it, each request runs on a goroutine of its own. HTTP
	// requests always run on their own request's goroutine.
	Inline bool
	// DiscoverAllVersions lists every version served in the
	// supportedVersions of server/discover, those of the handshake eras
	// too (newest first), not only the stateless era's: a client that
	// speaks no stateless version then learns which initialize to send.
	DiscoverAllVersions bool
	// ModernConnNotifications sends the notifications that belong to no
	// request (Broadcast, ListChanged, …) to the connections (stdio,
	// ServeConn) of the stateless era too, while they have no
	// subscriptions/listen stream open, as servers did before listen
	// streams existed. Without it, such a connection gets them on its
	// listen streams only.
	ModernConnNotifications bool
	// MaxMessageSize bounds one incoming message: a stdio line or a POST
	// body (default 16 MiB). A longer line is skipped; a longer body is
	// refused with 413.
	MaxMessageSize int
	// MaxSessionState bounds what one client makes the Server keep for
	// its session, in bytes: its clientInfo and capabilities, resource
	// subscriptions, and listen streams' resource filters (default
	// DefaultMaxSessionState, 64 KiB; negative: no bound). A request
	// that would pass it is refused with CodeSessionStateTooLarge; see
	// bounds.go.
	MaxSessionState int
	// MaxRetained bounds what every session holds together, in bytes
	// (their state, and a fixed cost for each HTTP session and
	// connection; default DefaultMaxRetained, 64 MiB; negative: no
	// bound). A new HTTP session that would pass it evicts the longest
	// idle HTTP sessions; a request of a session already open that would
	// pass it is refused with CodeSessionStateTooLarge.
	MaxRetained int64
	// OnSessionRestored, when set, is called for each sealed HTTP session
	// this Server takes up from its id alone (HTTPOptions.Seal: another
	// replica created it, or this one restarted or forgot it), before its
	// first request is served: its log level and subscriptions are set,
	// and the Handler sets up again what it keeps per session (e.g. the
	// upstream subscriptions behind Subscriptions).
	OnSessionRestored func(s *Session)
	// OnSessionClosed, when set, is called once for each session that
	// closes (its HTTP session ended, its connection closed, or Close),
	// after its requests were cancelled and its listen streams ended.
	OnSessionClosed func(s *Session)
	// Logger receives the Server's logs (debug only); the zero value logs
	// nothing.
	Logger zerolog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// HTTP configures Streamable HTTP (HTTPHandler).
	HTTP HTTPOptions
}

// HTTPOptions configure Streamable HTTP. The zero value answers POSTs
// with JSON (or an event stream once a request sends a notification of
// its own), keeps 256 notifications per session for its GET streams, and
// bounds neither sessions nor streams.
type HTTPOptions struct {
	// OutboxSize bounds the events an event stream keeps for replay: the
	// notifications of a session's standalone stream (GET), and the
	// messages of a resumable POST stream (default 256; the oldest is
	// dropped).
	OutboxSize int
	// MaxSessions caps the sessions kept at once (0: no cap). A new
	// session over the cap evicts the longest idle ones (a 64th of the
	// cap at once, sessions with nothing in flight and no stream open
	// first); an evicted session ends as if its client had sent DELETE.
	MaxSessions int
	// MaxStreamsPerSession caps the GET streams a session has open at once
	// (0: no cap); one more is refused with 409.
	MaxStreamsPerSession int
	// SSEResponses answers the POSTs of a session with event streams that
	// can be resumed: a priming event (an id, the retry field, no data)
	// first, every event numbered, kept for a GET with Last-Event-ID. A
	// stateless-era POST is answered with a one-event stream.
	SSEResponses bool
	// SSERetry is the retry field of the priming event (default
	// DefaultSSERetry).
	SSERetry time.Duration
	// BodyTimeout bounds how long a POST's body may take to arrive once
	// its headers have (default DefaultBodyTimeout, 30 s; negative: no
	// bound): a slower one is answered 408 and its connection closed.
	// Only the body's read is bounded, never the answer's stream.
	BodyTimeout time.Duration
	// NoGetStream answers a GET without Last-Event-ID with 405: the
	// server offers no standalone stream (resumption still works).
	NoGetStream bool
	// KeepAlive is how often an idle GET stream gets a comment line
	// (default 25 s), and so does the answer to a POST that takes longer
	// (of a client that takes event streams, stateless era aside): it
	// turns into an event stream, so that a client or proxy that drops a
	// connection silent for minutes keeps it during a long tool call.
	KeepAlive time.Duration
	// PollAfter, when positive, makes the clients of a session that
	// negotiated 2025-11-25 or later poll for a long answer (SSE polling,
	// SEP-1699): once a request that Pollable accepts has waited that
	// long for its answer, its POST response (an event stream) ends after
	// a priming event (an id, the retry field SSERetry, no data); the
	// request goes on, and what it sends from then on (its notifications,
	// then its answer) is kept for a GET with that Last-Event-ID, which
	// gets them and ends with the answer (the stream is then forgotten).
	// So no response stays open for the length of a long request. Such a
	// request is served on a goroutine of its own, a hand-off that costs
	// every pollable request some CPU, polled or not. Ignored with
	// SSEResponses (whose streams are resumable from the start), and for a
	// POST that does not take an event stream.
	PollAfter time.Duration
	// Pollable chooses the requests PollAfter applies to (nil: every
	// request the Handler serves; the Server's own methods are answered
	// at once and never polled).
	Pollable func(r *Request) bool
	// CheckHeaders, when set, checks more of a stateless-era request's
	// headers once the standard ones passed (e.g. the Mcp-Param-*
	// headers of a tool's x-mcp-header arguments); its error is answered
	// with HTTP 400.
	CheckHeaders func(h http.Header, r *Request) *protocol.Error
	// Seal, with keys, makes the Mcp-Session-Id of a handshake-era
	// session carry the session, sealed (see seal.go): any Server with
	// the same keys serves it. Its zero value seals nothing. New panics
	// on a key that is not SealKeySize bytes (check them first with
	// NewSealer).
	Seal SealOptions
}

// Defaults.
const (
	// DefaultMaxMessageSize is Options.MaxMessageSize's zero value.
	DefaultMaxMessageSize = 16 << 20
	// DefaultOutboxSize is HTTPOptions.OutboxSize's zero value.
	DefaultOutboxSize = 256
	// DefaultSSERetry is HTTPOptions.SSERetry's zero value.
	DefaultSSERetry = 500 * time.Millisecond
	// DefaultKeepAlive is HTTPOptions.KeepAlive's zero value.
	DefaultKeepAlive = 25 * time.Second
)

// withDefaults fills in the zero values.
func (o Options) withDefaults() Options {
	if len(o.Versions) == 0 {
		o.Versions = protocol.SupportedVersions()
	}
	if o.Handler == nil {
		o.Handler = MethodNotFound
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.MaxSessionState == 0 {
		o.MaxSessionState = DefaultMaxSessionState
	}
	if o.MaxRetained == 0 {
		o.MaxRetained = DefaultMaxRetained
	}
	if o.HTTP.BodyTimeout == 0 {
		o.HTTP.BodyTimeout = DefaultBodyTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HTTP.OutboxSize <= 0 {
		o.HTTP.OutboxSize = DefaultOutboxSize
	}
	if o.HTTP.SSERetry <= 0 {
		o.HTTP.SSERetry = DefaultSSERetry
	}
	if o.HTTP.KeepAlive <= 0 {
		o.HTTP.KeepAlive = DefaultKeepAlive
	}
	return o
}
