package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// The receiving half: Session implements transports.Receiver. These
// methods run on the transport's read goroutine(s).

var _ transports.Receiver = (*Session)(nil)

// Frame handles one frame from the server.
func (s *Session) Frame(data []byte) {
	m, err := protocol.Decode(data)
	if err != nil {
		s.badFrame(data, err)
		return
	}
	if s.badInARow.Load() != 0 {
		s.badInARow.Store(0)
	}
	s.framesIn.Add(1)
	switch m.Kind {
	case protocol.KindResponse:
		s.complete(m)
	case protocol.KindNotification:
		s.notification(m)
	case protocol.KindRequest:
		s.bg.Add(1)
		s.serving.Add(1)
		go s.serveRequest(m)
	}
}

// complete hands a response to its waiter.
func (s *Session) complete(m *protocol.Message) {
	id, ok := m.ID.Int64()
	if !ok {
		// mcpvisor only sends integer ids; a null id comes with an error
		// about a request the server could not parse.
		s.unknown.Add(1)
		if m.Error != nil {
			s.log.Warn().Int64("code", m.Error.Code).Str("error", m.Error.Message).Msg("server reported an error about an unidentifiable request")
		}
		return
	}
	s.mu.Lock()
	c, ok := s.pending[id]
	if ok {
		delete(s.pending, id)
	}
	s.mu.Unlock()
	if !ok {
		s.unknown.Add(1)
		s.log.Debug().Int64("id", id).Msg("dropping a response to no pending request (late or duplicate)")
		return
	}
	if m.Error != nil {
		c.ch <- reply{err: m.Error}
		return
	}
	c.ch <- reply{result: m.Result}
}

// failID fails the pending call with the given id, if any.
func (s *Session) failID(id protocol.ID, err error) bool {
	n, ok := id.Int64()
	if !ok {
		return false
	}
	s.mu.Lock()
	c, ok := s.pending[n]
	if ok {
		delete(s.pending, n)
	}
	s.mu.Unlock()
	if ok {
		c.ch <- reply{err: err}
	}
	return ok
}

func (s *Session) notification(m *protocol.Message) {
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
			s.failID(p.RequestID, fmt.Errorf("%w: the server cancelled the request: %s", ErrConnectionClosed, reason))
		}
		return
	case protocol.NotificationSubscriptionsAck:
		s.acks.Add(1)
		s.acknowledged(m.Params)
	default:
		if s.anyMuted.Load() && s.mutedNotification(m.Params) {
			s.muted.Add(1)
			return
		}
	}
	if h := s.opts.Handler; h != nil {
		h.Notification(m.Method, m.Params)
	}
}

// badFrame counts and skips a frame that did not decode. A batch is
// rejected as a whole; the calls it answered fail with a clear error.
func (s *Session) badFrame(data []byte, err error) {
	trimmed := bytes.TrimSpace(data)
	switch {
	case errors.Is(err, protocol.ErrBatch):
		s.malformed.Add(1)
		var items []struct {
			ID *protocol.ID `json:"id"`
		}
		_ = json.Unmarshal(trimmed, &items)
		failed := 0
		for _, it := range items {
			if it.ID != nil && s.failID(*it.ID, fmt.Errorf("%w: the server answered in a JSON-RPC batch, which mcpvisor does not accept", ErrMalformedResponse)) {
				failed++
			}
		}
		s.log.Warn().Int("items", len(items)).Int("calls_failed", failed).Msg("server sent a JSON-RPC batch; rejected")
	case len(trimmed) > 0 && trimmed[0] != '{':
		// Log lines, banners and progress bars printed to stdout by servers
		// that should have used stderr. Skipped, never fatal.
		if n := s.nonProtocol.Add(1); n <= 10 || n%1000 == 0 {
			s.log.Debug().Int64("count", n).Bytes("line", clip(trimmed, 200)).Msg("skipping non-protocol output on stdout")
		}
	default:
		n := s.malformed.Add(1)
		defer s.countBadFrame()
		if id, ok := protocol.FindID(trimmed); ok {
			if s.failID(id, fmt.Errorf("%w: %v", ErrMalformedResponse, err)) {
				return
			}
		}
		if n <= 10 || n%1000 == 0 {
			s.log.Warn().Err(err).Int64("count", n).Bytes("frame", clip(trimmed, 200)).Msg("skipping malformed frame")
		}
	}
}

// countBadFrame counts a malformed or oversize frame, and ends the session
// when there have been maxBadFramesInARow of them with no valid frame in
// between.
func (s *Session) countBadFrame() {
	if n := s.badInARow.Add(1); n == maxBadFramesInARow {
		s.log.Warn().Int64("frames", n).Msg("too many malformed or oversize frames in a row; ending the session")
		s.Closed(fmt.Errorf("%w: %d malformed or oversize frames in a row", ErrMalformedResponse, n))
	}
}

// FrameError handles a frame the transport dropped. An oversize response
// fails its call at once when its id can be found in the frame's prefix.
func (s *Session) FrameError(err error) {
	var reqErr *transports.RequestError
	if errors.As(err, &reqErr) {
		failed := s.failID(reqErr.ID, reqErr.Err)
		s.log.Debug().Err(reqErr.Err).Bool("call_failed", failed).Msg("transport failed a request")
		return
	}
	var tooBig *transports.FrameTooLargeError
	if !errors.As(err, &tooBig) {
		s.log.Warn().Err(err).Msg("transport dropped a frame")
		return
	}
	s.oversize.Add(1)
	defer s.countBadFrame()
	failed := false
	if id, ok := protocol.FindID(tooBig.Prefix); ok {
		failed = s.failID(id, tooBig)
	}
	s.log.Warn().Int64("limit", tooBig.Limit).Int64("size_at_least", tooBig.Size).Bool("call_failed", failed).Msg("dropped an oversize frame")
}

// Closed handles the end of the connection.
func (s *Session) Closed(err error) {
	if err == nil {
		err = transports.ErrClosed
	}
	s.fail(fmt.Errorf("%w: %w", ErrConnectionClosed, err))
	if h := s.opts.Handler; h != nil {
		h.Closed(s.Err())
	}
}

// serveRequest answers a server-to-client request.
func (s *Session) serveRequest(m *protocol.Message) {
	defer s.bg.Done()
	defer s.serving.Add(-1)
	<-s.attached
	timeout := s.opts.RequestTimeout
	if timeout <= 0 {
		timeout = replyTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	go func() { // the handler's context also ends with the session
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()

	var result any
	var rpcErr *protocol.Error
	switch {
	case m.Method == protocol.MethodPing:
		result = json.RawMessage(`{}`)
	case s.opts.Requests != nil:
		r, err := s.opts.Requests(ctx, m.Method, m.Params)
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
	if err := s.conn.Send(sendCtx, frame); err != nil && s.Err() == nil {
		s.log.Debug().Err(err).Str("method", m.Method).Msg("could not answer a server request")
	}
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
