package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Handler serves the requests of a server's clients that the Server does
// not answer itself: everything but initialize, server/discover, ping,
// logging/setLevel and subscriptions/listen.
//
// ServeMCP answers r through w, exactly once: before it returns, or later
// from another goroutine. A handler that leaves r unanswered leaves it
// pending until its client cancels it or goes away. ctx is the request's:
// it ends when the client cancels the request (notifications/cancelled),
// its session closes, or its HTTP request ends; it does not end when
// ServeMCP returns. On a connection served with Options.Inline, ctx is
// the connection's (see Options.Inline).
type Handler interface {
	ServeMCP(ctx context.Context, w ResponseWriter, r *Request)
}

// HandlerFunc is a function that is a Handler.
type HandlerFunc func(ctx context.Context, w ResponseWriter, r *Request)

// ServeMCP calls f.
func (f HandlerFunc) ServeMCP(ctx context.Context, w ResponseWriter, r *Request) { f(ctx, w, r) }

// Middleware wraps a Handler: it sees every request before next does
// (the Server's own methods included) and may answer it itself, delay
// it, or wrap w to see the answer.
type Middleware func(next Handler) Handler

// NotificationHandler is implemented by a Handler that wants the
// notifications its clients send, after the Server has handled those it
// knows (notifications/initialized, notifications/cancelled).
type NotificationHandler interface {
	HandleNotification(ctx context.Context, s *Session, method string, params json.RawMessage)
}

// MethodNotFound answers every request with -32601; it is the Handler
// of a Server given none.
var MethodNotFound Handler = HandlerFunc(func(_ context.Context, w ResponseWriter, r *Request) {
	w.Error(protocol.NewError(protocol.CodeMethodNotFound, "method not found: %s", r.Method))
})

// Request is one request of a client.
type Request struct {
	ID     protocol.ID
	Method string
	Params json.RawMessage
	// Session is the client the request came from. A request of the
	// stateless era over HTTP has a session of its own, for that one
	// request.
	Session *Session
	// Meta is what the _meta of a request of the stateless era
	// (2026-07-28) says, validated; nil in the handshake eras.
	Meta *Meta
	// Header is the HTTP request's header; nil over stdio and other
	// connections.
	Header http.Header

	x *exchange // the request's own ResponseWriter, under any middleware's
}

// Modern reports whether the request is of the stateless era.
func (r *Request) Modern() bool { return r.Meta != nil }

// Capabilities returns the capabilities the client declared for this
// request: in its _meta (stateless era), or at initialize.
func (r *Request) Capabilities() protocol.ClientCapabilities {
	if r.Meta != nil {
		return r.Meta.ClientCapabilities
	}
	return r.Session.Client().Capabilities
}

// ResponseWriter answers one request. Reply, Error, WriteFrame and
// ReplyWith answer it (the first of them that is called does; the rest
// do nothing, and so do they all once the client cancelled the request,
// which the protocol says not to answer). Notify and Ask may be called
// before the answer, from any goroutine.
type ResponseWriter interface {
	// Reply answers with result: encoded with encoding/json, unless it
	// is a protocol.ValidJSON or json.RawMessage, which go as they are.
	Reply(result any)
	// Error answers with a JSON-RPC error.
	Error(e *protocol.Error)
	// WriteFrame answers with a whole JSON-RPC response the handler
	// encoded itself (the answer to this request's ID).
	WriteFrame(frame []byte)
	// ReplyWith answers with whatever write puts on the wire, for an
	// answer no encoder makes (a frame too large to build in memory, one
	// cut short). write runs once, where the transport would write the
	// answer; an error it returns ends the connection (over HTTP, the
	// response is aborted).
	ReplyWith(write func(Wire) error)
	// Notify sends a notification that belongs to the request (progress,
	// a log message of the call) on the request's own stream: the
	// connection, or the POST's response, which then becomes an event
	// stream. It reports false when it could not be sent (the client
	// does not take an event stream, or the request has ended).
	Notify(method string, params any) bool
	// Ask sends the client a request (sampling/createMessage,
	// elicitation/create, roots/list) on the request's own stream, or
	// the session's when the request's cannot carry it, and waits for
	// the answer: its result, the client's *protocol.Error, or an error
	// when ctx ends (the client is then told the request is cancelled),
	// the session closes (ErrSessionClosed) or the client cannot be
	// reached (ErrUnreachable).
	Ask(ctx context.Context, method string, params any) (json.RawMessage, error)
}

// Disconnecter is implemented by the ResponseWriter of a request that
// came over HTTP.
type Disconnecter interface {
	// Disconnect ends the HTTP response now, without the answer, as a
	// server may to make its client poll. An event stream that can be
	// resumed (HTTPOptions.SSEResponses, in a session) keeps what is
	// sent after, for a GET with Last-Event-ID; otherwise the answer is
	// lost (the client must send the request again) and the request's
	// context ends.
	Disconnect()
}

// Wire is where one message is written: a line of stdio, an HTTP
// response's JSON body, an event of an event stream, or a message of a
// connection. Options.FrameHook and ResponseWriter.ReplyWith write
// through it.
type Wire interface {
	// Kind says what the wire is.
	Kind() WireKind
	// WriteMessage writes data as one message, framed as the transport
	// frames messages (a line, an event, a body, a connection's message).
	WriteMessage(data []byte) error
	// WriteBytes writes b as it is, outside any framing: what a server
	// that breaks its transport's framing would write.
	WriteBytes(b []byte) error
	// Flush sends what was written.
	Flush() error
	// Header is the HTTP response's header while it can still be set
	// (a JSON body not yet written); nil otherwise.
	Header() http.Header
}

// WireKind says what a Wire is.
type WireKind uint8

// The kinds of Wire.
const (
	WireStdio     WireKind = iota + 1 // a line of stdout
	WireJSON                          // an HTTP response's JSON body
	WireEventData                     // an event of an HTTP event stream
	WireConn                          // a message of a connection served by ServeConn
)

// String names the kind.
func (k WireKind) String() string {
	switch k {
	case WireStdio:
		return "stdio"
	case WireJSON:
		return "json"
	case WireEventData:
		return "event"
	case WireConn:
		return "conn"
	}
	return "unknown"
}
