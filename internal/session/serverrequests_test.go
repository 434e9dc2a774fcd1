package session_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio"
)

// answerConn keeps the responses the client sends, by id.
type answerConn struct {
	transports.Conn
	mu      sync.Mutex
	answers map[string]*protocol.Message
}

func (c *answerConn) Send(ctx context.Context, frame []byte) error {
	if err := c.Conn.Send(ctx, frame); err != nil {
		return err
	}
	if m, err := protocol.Decode(frame); err == nil && m.Kind == protocol.KindResponse {
		c.mu.Lock()
		c.answers[m.ID.String()] = m
		c.mu.Unlock()
	}
	return nil
}

func (c *answerConn) answer(id string) *protocol.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answers[id]
}

// Server-to-client requests: ping is always answered; a request without
// a handler gets method-not-found; a handler slower than RequestTimeout
// has its context ended and the server gets an error, in time.
func TestServerToClientRequests(t *testing.T) {
	conn := &answerConn{answers: map[string]*protocol.Message{}}
	var recv transports.Receiver // the session's receiving half, to inject the server's requests
	dial := func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
		recv = r
		c, err := stdio.Dial(ctx, mockserver.Command(), fastClose, r)
		conn.Conn = c
		return conn, err
	}
	slow := func(ctx context.Context, method string, _ json.RawMessage) (any, error) {
		if method == protocol.MethodSamplingCreateMessage {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, protocol.NewError(protocol.CodeMethodNotFound, "no %s", method)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := session.Open(ctx, dial, session.Options{Requests: slow, RequestTimeout: 100 * time.Millisecond,
		ClientInfo: protocol.Implementation{Name: "t", Version: "0"}})
	require.NoError(t, err)
	defer s.Close(context.Background(), nil)

	recv.Frame([]byte(`{"jsonrpc":"2.0","id":"p1","method":"ping"}`))
	recv.Frame([]byte(`{"jsonrpc":"2.0","id":"r1","method":"roots/list"}`))
	recv.Frame([]byte(`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`))
	require.Eventually(t, func() bool {
		return conn.answer(`"p1"`) != nil && conn.answer(`"r1"`) != nil && conn.answer(`"s1"`) != nil
	}, 5*time.Second, 5*time.Millisecond)
	assert.JSONEq(t, `{}`, string(conn.answer(`"p1"`).Result))
	assert.EqualValues(t, protocol.CodeMethodNotFound, conn.answer(`"r1"`).Error.Code)
	require.NotNil(t, conn.answer(`"s1"`).Error, "the slow handler's request is answered with an error")
}
