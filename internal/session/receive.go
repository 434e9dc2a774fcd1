package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// receiver is the receiving half of a session: the transports.Receiver
// the transport delivers to. It decodes each frame and routes it: a
// response to its waiter in the core, a notification to the
// subscriptions and the Handler, a request to the server requests.
//
// Concurrency: its methods run on the transport's read goroutine(s); the
// counters are atomic (read by Session.Stats and Session.Liveness).
type receiver struct {
	s *Session

	nonProtocol, malformed, oversize, unknown atomic.Int64
	// badInARow counts malformed and oversize frames since the last frame
	// that decoded (see maxBadFramesInARow).
	badInARow atomic.Int64
	framesIn  atomic.Uint64 // frames decoded from the server
}

var _ transports.Receiver = (*receiver)(nil)

// Frame handles one frame from the server.
func (r *receiver) Frame(data []byte) {
	m, err := protocol.Decode(data)
	if err != nil {
		r.badFrame(data, err)
		return
	}
	if r.badInARow.Load() != 0 {
		r.badInARow.Store(0)
	}
	r.framesIn.Add(1)
	switch m.Kind {
	case protocol.KindResponse:
		r.response(m)
	case protocol.KindNotification:
		r.notification(m)
	case protocol.KindRequest:
		r.s.core.bg.Add(1)
		r.s.inbound.serving.Add(1)
		go r.s.inbound.serve(m)
	}
}

// response hands a response to its waiter.
func (r *receiver) response(m *protocol.Message) {
	id, ok := m.ID.Int64()
	if !ok {
		// mcpvisor only sends integer ids; a null id comes with an error
		// about a request the server could not parse.
		r.unknown.Add(1)
		if m.Error != nil {
			r.s.core.log.Warn().Int64("code", m.Error.Code).Str("error", m.Error.Message).Msg("server reported an error about an unidentifiable request")
		}
		return
	}
	rep := reply{result: m.Result}
	if m.Error != nil {
		rep = reply{err: m.Error}
	}
	if !r.s.core.complete(id, rep) {
		r.unknown.Add(1)
		r.s.core.log.Debug().Int64("id", id).Msg("dropping a response to no pending request (late or duplicate)")
	}
}

// failID fails the pending call with the given id, if any.
func (r *receiver) failID(id protocol.ID, err error) bool {
	n, ok := id.Int64()
	return ok && r.s.core.complete(n, reply{err: err})
}

func (r *receiver) notification(m *protocol.Message) {
	switch m.Method {
	case protocol.NotificationCancelled:
		// The server gave up on one of our requests: fail it now rather than
		// let it wait for its deadline.
		var p protocol.CancelledParams
		if json.Unmarshal(m.Params, &p) == nil {
			reason := p.Reason
			if reason == "" {
				reason = "no reason given"
			}
			r.failID(p.RequestID, fmt.Errorf("%w: the server cancelled the request: %s", ErrConnectionClosed, reason))
		}
		return
	case protocol.NotificationSubscriptionsAck:
		r.s.subs.acknowledged(m.Params)
	default:
		if r.s.subs.mutes(m.Params) {
			return
		}
	}
	if h := r.s.core.handler; h != nil {
		h.Notification(m.Method, m.Params)
	}
}

// badFrame counts and skips a frame that did not decode. A batch is
// rejected as a whole; the calls it answered fail with a clear error.
func (r *receiver) badFrame(data []byte, err error) {
	trimmed := bytes.TrimSpace(data)
	switch {
	case errors.Is(err, protocol.ErrBatch):
		r.malformed.Add(1)
		var items []struct {
			ID *protocol.ID `json:"id"`
		}
		_ = json.Unmarshal(trimmed, &items)
		failed := 0
		for _, it := range items {
			if it.ID != nil && r.failID(*it.ID, fmt.Errorf("%w: the server answered in a JSON-RPC batch, which mcpvisor does not accept", ErrMalformedResponse)) {
				failed++
			}
		}
		r.s.core.log.Warn().Int("items", len(items)).Int("calls_failed", failed).Msg("server sent a JSON-RPC batch; rejected")
	case len(trimmed) > 0 && trimmed[0] != '{':
		// Log lines, banners and progress bars printed to stdout by servers
		// that should have used stderr. Skipped, never fatal.
		if n := r.nonProtocol.Add(1); n <= 10 || n%1000 == 0 {
			r.s.core.log.Debug().Int64("count", n).Bytes("line", clip(trimmed, 200)).Msg("skipping non-protocol output on stdout")
		}
	default:
		n := r.malformed.Add(1)
		defer r.countBadFrame()
		if id, ok := protocol.FindID(trimmed); ok {
			if r.failID(id, fmt.Errorf("%w: %v", ErrMalformedResponse, err)) {
				return
			}
		}
		if n <= 10 || n%1000 == 0 {
			r.s.core.log.Warn().Err(err).Int64("count", n).Bytes("frame", clip(trimmed, 200)).Msg("skipping malformed frame")
		}
	}
}

// countBadFrame counts a malformed or oversize frame, and ends the session
// when there have been maxBadFramesInARow of them with no valid frame in
// between.
func (r *receiver) countBadFrame() {
	if n := r.badInARow.Add(1); n == maxBadFramesInARow {
		r.s.core.log.Warn().Int64("frames", n).Msg("too many malformed or oversize frames in a row; ending the session")
		r.Closed(fmt.Errorf("%w: %d malformed or oversize frames in a row", ErrMalformedResponse, n))
	}
}

// FrameError handles a frame the transport dropped. An oversize response
// fails its call at once when its id can be found in the frame's prefix.
func (r *receiver) FrameError(err error) {
	var reqErr *transports.RequestError
	if errors.As(err, &reqErr) {
		failed := r.failID(reqErr.ID, reqErr.Err)
		r.s.core.log.Debug().Err(reqErr.Err).Bool("call_failed", failed).Msg("transport failed a request")
		return
	}
	var tooBig *transports.FrameTooLargeError
	if !errors.As(err, &tooBig) {
		r.s.core.log.Warn().Err(err).Msg("transport dropped a frame")
		return
	}
	r.oversize.Add(1)
	defer r.countBadFrame()
	failed := false
	if id, ok := protocol.FindID(tooBig.Prefix); ok {
		failed = r.failID(id, tooBig)
	}
	r.s.core.log.Warn().Int64("limit", tooBig.Limit).Int64("size_at_least", tooBig.Size).Bool("call_failed", failed).Msg("dropped an oversize frame")
}

// Closed handles the end of the connection.
func (r *receiver) Closed(err error) {
	if err == nil {
		err = transports.ErrClosed
	}
	c := &r.s.core
	c.fail(fmt.Errorf("%w: %w", ErrConnectionClosed, err))
	if c.handler != nil {
		c.handler.Closed(c.ended())
	}
}

// serverRequests answers what the server asks of the client: the
// server-to-client requests it sends (roots/list, sampling/createMessage,
// elicitation/create, ping), and the input rounds of multi round-trip
// requests (see mrtr.go), which ask the same things inside a result.
//
// Concurrency: immutable after Open but for serving (atomic). Each
// request is answered on a goroutine of its own, counted in core.bg.
type serverRequests struct {
	core     *core
	requests RequestHandler
	input    InputHandler
	timeout  time.Duration // bound of one answer or input round
	serving  atomic.Int64  // server requests being answered
}

// serve answers a server-to-client request.
func (sr *serverRequests) serve(m *protocol.Message) {
	c := sr.core
	defer c.bg.Done()
	defer sr.serving.Add(-1)
	<-c.attached
	ctx, cancel := context.WithTimeout(context.Background(), sr.timeout)
	defer cancel()
	go func() { // the handler's context also ends with the session
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()

	var result any
	var rpcErr *protocol.Error
	switch {
	case m.Method == protocol.MethodPing:
		result = json.RawMessage(`{}`)
	case sr.requests != nil:
		r, err := sr.requests(ctx, m.Method, m.Params)
		if err != nil {
			if !errors.As(err, &rpcErr) {
				rpcErr = protocol.NewError(protocol.CodeInternalError, "%v", err)
			}
		} else {
			result = r
		}
	default:
		rpcErr = protocol.NewError(protocol.CodeMethodNotFound, "mcpvisor does not handle %q", m.Method)
	}
	var frame []byte
	var err error
	if rpcErr != nil {
		frame, err = protocol.AppendError(nil, m.ID, rpcErr)
	} else {
		frame, err = protocol.AppendResult(nil, m.ID, result)
	}
	if err != nil {
		frame, _ = protocol.AppendError(nil, m.ID, protocol.NewError(protocol.CodeInternalError, "encoding the reply: %v", err))
	}
	// The reply gets its own deadline: the handler may have used up the
	// request's, and the server must still hear that it failed.
	sendCtx, cancelSend := context.WithTimeout(context.Background(), replyTimeout)
	defer cancelSend()
	if err := c.conn.Send(sendCtx, frame); err != nil && c.ended() == nil {
		c.log.Debug().Err(err).Str("method", m.Method).Msg("could not answer a server request")
	}
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
