package mcpserver

import (
	"context"
	"encoding/json"
	"sync/atomic"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// outlet is where the messages of one request go: the connection it came
// on, or its POST's response.
type outlet interface {
	// answer delivers the request's answer: frame, or what write writes;
	// code is its JSON-RPC error code (0 for a result, codeUnknown for a
	// frame the handler encoded). It is called at most once.
	answer(frame []byte, write func(Wire) error, code int64)
	// notify delivers a message that belongs to the request (a
	// notification, or a request to the client); false when it cannot.
	notify(frame []byte) bool
	// abandoned says the request ended without an answer: its client
	// cancelled it, or its session closed.
	abandoned()
}

// codeUnknown is the code of an answer whose frame the handler encoded.
const codeUnknown = 1

// The states of an exchange.
const (
	exchangeOpen uint32 = iota
	exchangeAnswered
	exchangeAbandoned
)

// exchange is one request being served: its ResponseWriter.
//
// Concurrency: the answer is given once, decided by state (a CAS); the
// other fields are set before the handler runs.
type exchange struct {
	req    Request
	srv    *Server
	out    outlet
	ctx    context.Context
	cancel context.CancelFunc // nil when ctx is the connection's (Options.Inline)
	state  atomic.Uint32
}

// newExchange returns the exchange of request m of sess. With track, its
// context is its own (ended by cancellation) and it is registered in the
// session; without, ctx is used as it is.
func newExchange(ctx context.Context, srv *Server, sess *Session, m *protocol.Message, out outlet, track bool) (*exchange, bool) {
	x := &exchange{srv: srv, out: out, req: Request{ID: m.ID, Method: m.Method, Params: m.Params, Session: sess}}
	x.req.x = x
	if !track {
		x.ctx = ctx
		return x, !sess.Closed()
	}
	x.ctx, x.cancel = context.WithCancel(ctx)
	if !sess.begin(x) {
		x.cancel()
		return x, false
	}
	return x, true
}

// take claims the answer; false when the request was answered or
// abandoned already. The caller delivers the answer, then calls settled.
func (x *exchange) take() bool {
	return x.state.CompareAndSwap(exchangeOpen, exchangeAnswered)
}

// settled ends the request once its answer is delivered.
func (x *exchange) settled() {
	if x.cancel != nil {
		x.cancel()
		x.req.Session.end(x)
	}
}

// abandon ends the request without an answer (cancelled, or its session
// closed).
func (x *exchange) abandon() {
	if !x.state.CompareAndSwap(exchangeOpen, exchangeAbandoned) {
		return
	}
	x.out.abandoned()
	x.settled()
}

// Reply implements ResponseWriter.
func (x *exchange) Reply(result any) {
	if x.state.Load() != exchangeOpen {
		return
	}
	if x.req.Meta != nil && x.srv.opts.ModernResult != nil {
		result = x.srv.opts.ModernResult(&x.req, result)
	}
	frame, err := protocol.AppendResult(nil, x.req.ID, result)
	if err != nil {
		x.Error(protocol.NewError(protocol.CodeInternalError, "encoding the result: %v", err))
		return
	}
	if x.take() {
		x.out.answer(frame, nil, 0)
		x.settled()
	}
}

// Error implements ResponseWriter.
func (x *exchange) Error(e *protocol.Error) {
	if x.state.Load() != exchangeOpen {
		return
	}
	frame, err := protocol.AppendError(nil, x.req.ID, e)
	if err != nil {
		frame, _ = protocol.AppendError(nil, x.req.ID, protocol.NewError(protocol.CodeInternalError, "encoding the error: %v", err))
	}
	if x.take() {
		x.out.answer(frame, nil, e.Code)
		x.settled()
	}
}

// WriteFrame implements ResponseWriter.
func (x *exchange) WriteFrame(frame []byte) {
	if x.take() {
		x.out.answer(frame, nil, codeUnknown)
		x.settled()
	}
}

// ReplyWith implements ResponseWriter.
func (x *exchange) ReplyWith(write func(Wire) error) {
	if x.take() {
		x.out.answer(nil, write, 0)
		x.settled()
	}
}

// Notify implements ResponseWriter.
func (x *exchange) Notify(method string, params any) bool {
	if x.state.Load() != exchangeOpen {
		return false
	}
	frame, err := notification(method, params)
	if err != nil {
		x.srv.log.Debug().Err(err).Str("method", method).Msg("encoding a notification")
		return false
	}
	return x.out.notify(frame)
}

// Ask implements ResponseWriter.
func (x *exchange) Ask(ctx context.Context, method string, params any) (json.RawMessage, error) {
	sess := x.req.Session
	if sess.kind == kindRequest {
		return nil, ErrUnreachable
	}
	send := func(frame []byte) bool {
		if x.state.Load() == exchangeOpen && x.out.notify(frame) {
			return true
		}
		return sess.send(frame)
	}
	return sess.asks.ask(ctx, sess.done, method, params, send)
}

// Disconnect implements Disconnecter for the requests that came over
// HTTP.
func (x *exchange) Disconnect() {
	if d, ok := x.out.(interface{ disconnect() bool }); ok && d.disconnect() {
		x.abandon()
	}
}

// notification encodes a notification.
func notification(method string, params any) ([]byte, error) {
	return protocol.AppendRequest(nil, protocol.ID{}, method, params)
}
