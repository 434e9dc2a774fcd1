package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/httppeer"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// refuseVersion answers the first n POSTs with HTTP 400 and an
// UnsupportedProtocolVersion error that lists supported, as the
// conformance suite's request-metadata scenario does with its first
// request whatever version it names.
func refuseVersion(n int32, supported ...string) httppeer.Hook {
	var refused atomic.Int32
	return func(w http.ResponseWriter, p httppeer.Post) bool {
		if p.Msg.Kind != protocol.KindRequest || refused.Add(1) > n {
			return false
		}
		id, _ := json.Marshal(p.Msg.ID)
		data, _ := json.Marshal(protocol.UnsupportedProtocolVersionData{Supported: supported, Requested: p.Header.Get("Mcp-Protocol-Version")})
		httppeer.WriteJSON(w, http.StatusBadRequest, fmt.Appendf(nil,
			`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"Unsupported protocol version","data":%s}}`,
			id, protocol.CodeUnsupportedProtocolVersion, data))
		return true
	}
}

// A server/discover refused with -32022 whose data lists a stateless
// version is asked again with that version (even the one just refused),
// not abandoned for initialize; and every POST then carries the version
// header and the request _meta (SEP-2575).
func TestRefusedVersionIsRetried(t *testing.T) {
	peer := httppeer.New(t, mockserver.Options{})
	peer.SetHook(refuseVersion(1, protocol.Version20260728))
	elicitation := json.RawMessage(`{}`)
	s, err := openHTTP(t, peer, session.Options{Capabilities: protocol.ClientCapabilities{Elicitation: &elicitation}})
	require.NoError(t, err)
	assert.Equal(t, protocol.Version20260728, s.Peer().Version)

	ctx := context.Background()
	_, err = s.Lists().Tools(ctx)
	require.NoError(t, err)
	res, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"hi"}`), nil)
	require.NoError(t, err)
	assert.False(t, res.IsError)

	posts := peer.Received()
	assert.Equal(t, []string{"server/discover", "server/discover", "tools/list", "tools/call"}, peer.Methods(),
		"the refused discover is retried; initialize is never sent")
	assert.NotEqual(t, posts[0].Msg.ID, posts[1].Msg.ID, "the retry is a new request")
	for _, p := range posts {
		assert.Equal(t, protocol.Version20260728, p.Header.Get("Mcp-Protocol-Version"), "%s: version header", p.Msg.Method)
		assert.Equal(t, p.Msg.Method, p.Header.Get("Mcp-Method"), "%s: method header", p.Msg.Method)
		var params struct {
			Meta protocol.Meta `json:"_meta"`
		}
		require.NoError(t, json.Unmarshal(p.Msg.Params, &params), p.Msg.Method)
		var version string
		var info protocol.Implementation
		var caps map[string]json.RawMessage
		assert.True(t, params.Meta.Get(protocol.MetaProtocolVersion, &version), "%s: _meta protocolVersion", p.Msg.Method)
		assert.Equal(t, protocol.Version20260728, version, p.Msg.Method)
		assert.True(t, params.Meta.Get(protocol.MetaClientCapabilities, &caps), "%s: _meta clientCapabilities", p.Msg.Method)
		assert.Contains(t, caps, "elicitation", p.Msg.Method)
		assert.True(t, params.Meta.Get(protocol.MetaClientInfo, &info), "%s: _meta clientInfo", p.Msg.Method)
		assert.Equal(t, "mcpvisor-test", info.Name, p.Msg.Method)
	}
}

// The retry is bounded: a server that refuses the version it lists again
// is not asked forever; the session falls back to the handshake eras.
func TestVersionRefusedTwiceFallsBackToInitialize(t *testing.T) {
	peer := httppeer.New(t, mockserver.Options{})
	peer.SetHook(refuseVersion(2, protocol.Version20260728))
	s, err := openHTTP(t, peer, session.Options{})
	require.NoError(t, err)
	assert.Equal(t, protocol.Version20251125, s.Peer().Version)
	assert.Equal(t, []string{"server/discover", "server/discover", "initialize", "notifications/initialized"}, peer.Methods())
}

// A pinned stateless version that the server refuses while listing it is
// retried too; one it does not list is an ErrVersionMismatch.
func TestPinnedVersionRefusal(t *testing.T) {
	peer := httppeer.New(t, mockserver.Options{})
	peer.SetHook(refuseVersion(1, protocol.Version20260728))
	s, err := openHTTP(t, peer, session.Options{ProtocolVersion: protocol.Version20260728})
	require.NoError(t, err)
	assert.Equal(t, protocol.Version20260728, s.Peer().Version)

	other := httppeer.New(t, mockserver.Options{})
	other.SetHook(refuseVersion(1, "2099-01-01"))
	_, err = openHTTP(t, other, session.Options{ProtocolVersion: protocol.Version20260728})
	assert.ErrorIs(t, err, session.ErrVersionMismatch)
}

// The probe's deadline is the server's silence once the request went out.
// Over Streamable HTTP the answer comes with the POST (after whatever
// authorization its 401 started): a slow exchange is not a silent
// server, and the session stays in the stateless era — even a pinned one.
func TestSlowDiscoverOverHTTPIsNotSilence(t *testing.T) {
	for _, pinned := range []string{"", protocol.Version20260728} {
		peer := httppeer.New(t, mockserver.Options{})
		peer.SetHook(func(w http.ResponseWriter, p httppeer.Post) bool {
			if p.Msg.Method == protocol.MethodDiscover {
				time.Sleep(300 * time.Millisecond) // e.g. a login during the exchange
			}
			return false
		})
		s, err := openHTTP(t, peer, session.Options{ProtocolVersion: pinned, DiscoverTimeout: 50 * time.Millisecond})
		require.NoError(t, err, "pinned %q", pinned)
		assert.Equal(t, protocol.Version20260728, s.Peer().Version)
		assert.Equal(t, []string{"server/discover"}, peer.Methods())
	}
}
