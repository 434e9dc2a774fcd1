package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Requests a server sends its client (sampling/createMessage,
// elicitation/create, roots/list): each gets an id of the Server's, the
// session remembers it until the answer comes (an answer is taken only
// from the session it was asked of), and the asker waits for the answer,
// the end of its context (then the client is told, with
// notifications/cancelled), or the end of the session.

// ask is one request sent to the client, waiting for its answer.
type ask struct {
	reply chan *protocol.Message // buffered 1
}

// Ask sends the client a request on the session's channel and waits for
// its answer: its result, the client's *protocol.Error, or an error when
// ctx ends, the session closes (ErrSessionClosed) or the session has no
// channel (ErrUnreachable).
func (s *Session) Ask(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if s.kind == kindRequest {
		return nil, ErrUnreachable
	}
	return s.ask(ctx, method, params, s.send)
}

// ask sends a request with send and waits for its answer.
func (s *Session) ask(ctx context.Context, method string, params any, send func([]byte) bool) (json.RawMessage, error) {
	rid := protocol.StringID("mcpserver-" + strconv.FormatUint(s.srv.askSeq.Add(1), 10))
	key := rid.String()
	frame, err := protocol.AppendRequest(nil, rid, method, params)
	if err != nil {
		return nil, protocol.NewError(protocol.CodeInvalidParams, "%v", err)
	}
	a := &ask{reply: make(chan *protocol.Message, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrSessionClosed
	}
	if s.asks == nil {
		s.asks = map[string]*ask{}
	}
	s.asks[key] = a
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.asks, key)
		s.mu.Unlock()
	}()
	if !send(frame) {
		return nil, ErrUnreachable
	}
	select {
	case m := <-a.reply:
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-s.done:
		return nil, ErrSessionClosed
	case <-ctx.Done():
		if c, err := notification(protocol.NotificationCancelled, protocol.CancelledParams{RequestID: rid, Reason: "the server's request ended"}); err == nil {
			send(c)
		}
		return nil, fmt.Errorf("mcpserver: no answer to %s: %w", method, context.Cause(ctx))
	}
}

// deliver hands a client's answer to the request it answers; false when
// the session asked no such request.
func (s *Session) deliver(m *protocol.Message) bool {
	key := m.ID.String()
	s.mu.Lock()
	a := s.asks[key]
	delete(s.asks, key)
	s.mu.Unlock()
	if a == nil {
		return false
	}
	a.reply <- m
	return true
}
