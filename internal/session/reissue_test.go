package session_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/httppeer"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// The mock's CutStreams fault processes a 2026-07-28 request and then
// breaks its response before the answer: an event stream that ends
// (SSEResponses), or a connection closed before any response (JSON).
func reissuePeer(t *testing.T, sse bool, cutMethod string, cuts int) (*httppeer.Peer, *session.Session) {
	t.Helper()
	peer := httppeer.New(t, mockserver.Options{Versions: []string{protocol.Version20260728}, SSEResponses: sse,
		CutStreams: cuts, CutMethod: cutMethod})
	s, err := openHTTP(t, peer, session.Options{})
	require.NoError(t, err)
	require.Equal(t, protocol.Version20260728, s.Peer().Version)
	return peer, s
}

// posted returns the ids of the POSTs of method the peer received.
func posted(peer *httppeer.Peer, method string) []string {
	var ids []string
	for _, p := range peer.Received() {
		if p.Msg.Method == method {
			id, _ := json.Marshal(p.Msg.ID)
			ids = append(ids, string(id))
		}
	}
	return ids
}

func reissueCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A read whose response stream breaks is re-issued once, under a new id,
// and its answer arrives: the lists, resources/read, and tools/call of a
// tool that says readOnlyHint.
func TestBrokenStreamReadIsReissued(t *testing.T) {
	for _, sse := range []bool{true, false} {
		name := map[bool]string{true: "event-stream", false: "json-connection-closed"}[sse]
		t.Run(name, func(t *testing.T) {
			peer, s := reissuePeer(t, sse, protocol.MethodToolsList, 1)
			ctx := reissueCtx(t)
			tools, err := s.Lists().Tools(ctx)
			require.NoError(t, err, "tools/list re-issued after its stream broke")
			assert.NotEmpty(t, tools)
			ids := posted(peer, protocol.MethodToolsList)
			require.Len(t, ids, 2, "tools/list sent twice: the lost one and its re-issue")
			assert.NotEqual(t, ids[0], ids[1], "the re-issue has a new id")
			assert.Equal(t, int64(1), s.Stats().Reissued)
		})
		t.Run(name+"/read-only-tool", func(t *testing.T) {
			peer, s := reissuePeer(t, sse, protocol.MethodToolsCall, 1)
			ctx := reissueCtx(t)
			_, err := s.Lists().Tools(ctx) // learns which tools are read-only
			require.NoError(t, err)
			res, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"again"}`), nil) // echo: readOnlyHint
			require.NoError(t, err, "a read-only tool's call is re-issued")
			require.NotEmpty(t, res.Content)
			assert.Equal(t, "again", res.Content[0].Text)
			ids := posted(peer, protocol.MethodToolsCall)
			require.Len(t, ids, 2)
			assert.NotEqual(t, ids[0], ids[1])
			assert.Equal(t, int64(1), s.Stats().Reissued)
		})
	}
}

// A tools/call of a tool without readOnlyHint is not re-issued: it fails
// with an error matching transports.ErrStreamBroken, sent once.
func TestBrokenStreamWriteIsNotReissued(t *testing.T) {
	peer, s := reissuePeer(t, true, protocol.MethodToolsCall, 1)
	ctx := reissueCtx(t)
	_, err := s.Lists().Tools(ctx) // learns which tools are read-only
	require.NoError(t, err)

	_, err = s.CallTool(ctx, "add", json.RawMessage(`{"a":1,"b":2}`), nil) // add: no annotations
	require.Error(t, err)
	assert.ErrorIs(t, err, transports.ErrStreamBroken)
	assert.Len(t, posted(peer, protocol.MethodToolsCall), 1, "a call that may have an effect is sent once")
	assert.Zero(t, s.Stats().Reissued)
	assert.NoError(t, s.Err(), "the session survives a broken stream")

	res, err := s.CallTool(ctx, "add", json.RawMessage(`{"a":1,"b":2}`), nil)
	require.NoError(t, err, "the next call works")
	assert.False(t, res.IsError)
}

// A re-issued read whose stream breaks again fails, typed, and is not
// sent a third time.
func TestSecondBreakFails(t *testing.T) {
	peer, s := reissuePeer(t, true, protocol.MethodToolsList, 2)
	ctx := reissueCtx(t)
	_, err := s.Lists().Tools(ctx)
	require.Error(t, err)
	assert.ErrorIs(t, err, transports.ErrStreamBroken)
	assert.Contains(t, err.Error(), "re-issued once")
	assert.Len(t, posted(peer, protocol.MethodToolsList), 2, "sent and re-issued once, no more")
	assert.Equal(t, int64(1), s.Stats().Reissued)
}
