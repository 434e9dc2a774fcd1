package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Requests a server sends its client (sampling/createMessage,
// elicitation/create, roots/list): each gets an id of the Server's, the
// session remembers it until the answer comes (an answer is taken only
// from the session it was asked of), and the asker waits for the answer,
// the end of its context (then the client is told, with
// notifications/cancelled), or the end of the session.

// asks are the requests a session sent its client that wait for their
// answers, by id.
//
// Concurrency: byID is guarded by mu; seq is the Server's (atomic).
type asks struct {
	seq  *atomic.Uint64 // numbers the requests sent to clients
	mu   sync.Mutex
	byID map[string]*ask
}

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
	return s.asks.ask(ctx, s.done, method, params, s.send)
}

// ask sends a request with send and waits for its answer, or for done
// (the session's end).
func (as *asks) ask(ctx context.Context, done <-chan struct{}, method string, params any, send func([]byte) bool) (json.RawMessage, error) {
	rid := protocol.StringID("mcpserver-" + strconv.FormatUint(as.seq.Add(1), 10))
	key := rid.String()
	frame, err := protocol.AppendRequest(nil, rid, method, params)
	if err != nil {
		return nil, protocol.NewError(protocol.CodeInvalidParams, "%v", err)
	}
	a := &ask{reply: make(chan *protocol.Message, 1)}
	select {
	case <-done:
		return nil, ErrSessionClosed
	default:
	}
	as.mu.Lock()
	if as.byID == nil {
		as.byID = map[string]*ask{}
	}
	as.byID[key] = a
	as.mu.Unlock()
	defer func() {
		as.mu.Lock()
		delete(as.byID, key)
		as.mu.Unlock()
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
	case <-done:
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
func (as *asks) deliver(m *protocol.Message) bool {
	key := m.ID.String()
	as.mu.Lock()
	a := as.byID[key]
	delete(as.byID, key)
	as.mu.Unlock()
	if a == nil {
		return false
	}
	a.reply <- m
	return true
}
