package gateway_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// A call that needs approval (an ask rule, an untrusted server) is put to
// the client that made it, by form elicitation; a client that declared
// no elicitation gets a CodeCallRefused error that says why, and is never
// stood in for by another client.
func TestGatewayAsksTheCallingClientToApprove(t *testing.T) {
	var fwd gateway.Forwarder
	opts := mcpvisor.Options{Logger: zerolog.Nop(), Permissions: mcpvisor.PermissionRules{Ask: []string{"mcp__*__add"}}}
	fwd.Configure(&opts)
	sup, err := mcpvisor.Start(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(ctx))
	})
	_, err = sup.SetServers(context.Background(), map[string]mcpvisor.ServerConfig{
		"fx":   {Config: mockserver.Command("-name", "fx")},
		"wary": {Config: mockserver.Command("-name", "wary"), Trust: mcpvisor.TrustUntrusted},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	g, srv := serve(t, sup, gateway.Options{})
	fwd.Attach(g)

	var mu sync.Mutex
	var asked []string
	answer := true
	capable := host(t, srv.URL, mcpvisor.Options{
		Elicitation: func(_ context.Context, _ string, req *protocol.ElicitParams) (*protocol.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Message)
			return &protocol.ElicitResult{Action: protocol.ElicitAccept,
				Content: map[string]json.RawMessage{"approve": json.RawMessage(map[bool]string{true: "true", false: "false"}[answer])}}, nil
		},
	})
	plain := host(t, srv.URL, mcpvisor.Options{})
	add := map[string]any{"a": 1, "b": 2}
	takeAsked := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := asked
		asked = nil
		return out
	}

	// Approved: the call goes through; the user saw what and why.
	res, err := capable.CallTool(t.Context(), "mcp__gw__fx__add", add)
	require.NoError(t, err)
	assert.Equal(t, "3", res.Content[0].Text)
	msgs := takeAsked()
	require.Len(t, msgs, 1)
	assert.Contains(t, msgs[0], `tool "add" of server "fx"`)
	assert.Contains(t, msgs[0], `ask rule "mcp__*__add"`)
	assert.Contains(t, msgs[0], `{"a":1,"b":2}`)

	// An untrusted server's call is asked too; a no refuses it.
	mu.Lock()
	answer = false
	mu.Unlock()
	_, err = capable.CallTool(t.Context(), "mcp__gw__wary__echo", map[string]any{"text": "x"})
	var pe *protocol.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, int64(gateway.CodeCallRefused), pe.Code)
	assert.Contains(t, pe.Message, "the approver said no")
	msgs = takeAsked()
	require.Len(t, msgs, 1)
	assert.Contains(t, msgs[0], `the server's trust is "untrusted"`)

	// A client without elicitation cannot approve: refused, and the
	// capable client is not asked in its place.
	_, err = plain.CallTool(t.Context(), "mcp__gw__fx__add", add)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, int64(gateway.CodeCallRefused), pe.Code)
	assert.Contains(t, pe.Message, "declared no elicitation")
	assert.Empty(t, takeAsked(), "another client never approves in its place")

	// A client of the stateless era (2026-07-28) is asked within its call
	// (input_required, then the retry with the answer).
	mu.Lock()
	answer = true
	mu.Unlock()
	stateless, err := mcpvisor.Start(context.Background(), mcpvisor.Options{Logger: zerolog.Nop(),
		Elicitation: func(_ context.Context, _ string, req *protocol.ElicitParams) (*protocol.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Message)
			return &protocol.ElicitResult{Action: protocol.ElicitAccept, Content: map[string]json.RawMessage{"approve": json.RawMessage("true")}}, nil
		}})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, stateless.Close(ctx))
	})
	_, err = stateless.SetServers(context.Background(), map[string]mcpvisor.ServerConfig{
		"gw": {Config: httpConfig(srv.URL), ProtocolVersion: protocol.Version20260728},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	res, err = stateless.CallTool(t.Context(), "mcp__gw__fx__add", add)
	require.NoError(t, err)
	assert.Equal(t, "3", res.Content[0].Text)
	assert.Len(t, takeAsked(), 1)

	// What needs no approval asks nobody.
	res, err = plain.CallTool(t.Context(), "mcp__gw__fx__echo", map[string]any{"text": "free"})
	require.NoError(t, err)
	assert.Equal(t, "free", res.Content[0].Text)
	assert.Empty(t, takeAsked())
}
