package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/actors/session"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// refuseVersion answers the first n POSTs with HTTP 400 and an
// UnsupportedProtocolVersion error that lists supported, as the
// conformance suite's request-metadata scenario does with its first
// request whatever version it names.
func refuseVersion(n int32, supported ...string) func(http.ResponseWriter, post) bool {
	var refused atomic.Int32
	return func(w http.ResponseWriter, p post) bool {
		if p.msg.Kind != protocol.KindRequest || refused.Add(1) > n {
			return false
		}
		id, _ := json.Marshal(p.msg.ID)
		data, _ := json.Marshal(protocol.UnsupportedProtocolVersionData{Supported: supported, Requested: p.header.Get("Mcp-Protocol-Version")})
		writeJSON(w, http.StatusBadRequest, fmt.Appendf(nil,
			`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"Unsupported protocol version","data":%s}}`,
			id, protocol.CodeUnsupportedProtocolVersion, data))
		return true
	}
}

func methods(posts []post) []string {
	out := make([]string, len(posts))
	for i, p := range posts {
		out[i] = p.msg.Method
	}
	return out
}

// A server/discover refused with -32022 whose data lists a stateless
// version is asked again with that version (even the one just refused),
// not abandoned for initialize; and every POST then carries the version
// header and the request _meta (SEP-2575).
func TestRefusedVersionIsRetried(t *testing.T) {
	peer := newHTTPPeer(t, mockserver.Options{})
	peer.setHook(refuseVersion(1, protocol.Version20260728))
	elicitation := json.RawMessage(`{}`)
	s, err := openHTTP(t, peer, session.Options{Capabilities: protocol.ClientCapabilities{Elicitation: &elicitation}})
	require.NoError(t, err)
	assert.Equal(t, protocol.Version20260728, s.ProtocolVersion())

	ctx := context.Background()
	_, err = s.ListTools(ctx)
	require.NoError(t, err)
	res, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"hi"}`), nil)
	require.NoError(t, err)
	assert.False(t, res.IsError)

	posts := peer.received()
	assert.Equal(t, []string{"server/discover", "server/discover", "tools/list", "tools/call"}, methods(posts),
		"the refused discover is retried; initialize is never sent")
	assert.NotEqual(t, posts[0].msg.ID, posts[1].msg.ID, "the retry is a new request")
	for _, p := range posts {
		assert.Equal(t, protocol.Version20260728, p.header.Get("Mcp-Protocol-Version"), "%s: version header", p.msg.Method)
		assert.Equal(t, p.msg.Method, p.header.Get("Mcp-Method"), "%s: method header", p.msg.Method)
		var params struct {
			Meta protocol.Meta `json:"_meta"`
		}
		require.NoError(t, json.Unmarshal(p.msg.Params, &params), p.msg.Method)
		var version string
		var info protocol.Implementation
		var caps map[string]json.RawMessage
		assert.True(t, params.Meta.Get(protocol.MetaProtocolVersion, &version), "%s: _meta protocolVersion", p.msg.Method)
		assert.Equal(t, protocol.Version20260728, version, p.msg.Method)
		assert.True(t, params.Meta.Get(protocol.MetaClientCapabilities, &caps), "%s: _meta clientCapabilities", p.msg.Method)
		assert.Contains(t, caps, "elicitation", p.msg.Method)
		assert.True(t, params.Meta.Get(protocol.MetaClientInfo, &info), "%s: _meta clientInfo", p.msg.Method)
		assert.Equal(t, "mcpvisor-test", info.Name, p.msg.Method)
	}
}

// The retry is bounded: a server that refuses the version it lists again
// is not asked forever; the session falls back to the handshake eras.
func TestVersionRefusedTwiceFallsBackToInitialize(t *testing.T) {
	peer := newHTTPPeer(t, mockserver.Options{})
	peer.setHook(refuseVersion(2, protocol.Version20260728))
	s, err := openHTTP(t, peer, session.Options{})
	require.NoError(t, err)
	assert.Equal(t, protocol.Version20251125, s.ProtocolVersion())
	assert.Equal(t, []string{"server/discover", "server/discover", "initialize", "notifications/initialized"}, methods(peer.received()))
}

// A pinned stateless version that the server refuses while listing it is
// retried too; one it does not list is an ErrVersionMismatch.
func TestPinnedVersionRefusal(t *testing.T) {
	peer := newHTTPPeer(t, mockserver.Options{})
	peer.setHook(refuseVersion(1, protocol.Version20260728))
	s, err := openHTTP(t, peer, session.Options{ProtocolVersion: protocol.Version20260728})
	require.NoError(t, err)
	assert.Equal(t, protocol.Version20260728, s.ProtocolVersion())

	other := newHTTPPeer(t, mockserver.Options{})
	other.setHook(refuseVersion(1, "2099-01-01"))
	_, err = openHTTP(t, other, session.Options{ProtocolVersion: protocol.Version20260728})
	assert.ErrorIs(t, err, session.ErrVersionMismatch)
}
