package session_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/streamable"
)

// A server/discover probe that does not reach the server (nothing
// listens, the connection breaks, a 5xx) says nothing about the server's
// protocol era: the connect fails, and negotiation neither falls back to
// initialize nor remembers the server as one that rejected discover. (It
// did: a stateless-era server reconnected to while it restarted was
// remembered as a handshake-era one, asked initialize ever after, and
// parked: TestStatelessServerThatGoesAwayIsReconnected, one run in a
// hundred and fifty under load.)
func TestADiscoverThatDoesNotReachTheServerTeachesNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now

	var memory session.Memory
	url := "http://" + addr + "/mcp"
	dial := func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
		return streamable.Dial(ctx, transports.Config{URL: url}, streamable.Options{}, r)
	}
	opts := session.Options{Memory: &memory, ClientInfo: protocol.Implementation{Name: "mcpvisor-test", Version: "0"}}
	_, err = session.Open(testwait.Context(t), dial, opts)
	require.Error(t, err)
	assert.Equal(t, transports.ClassRefused, transports.Classify(err), "the connect fails as refused: %v", err)
	assert.False(t, memory.DiscoverRejected(), "a refused probe is not a rejection")

	// The server comes up, of the stateless era only: it is reached in it.
	srv, err := mockserver.Serve(context.Background(), mockserver.Options{Transport: mockserver.TransportHTTP,
		Listen: addr, Versions: []string{protocol.Version20260728}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	s, err := session.Open(testwait.Context(t), dial, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(testwait.Context(t), nil) })
	assert.Equal(t, protocol.Version20260728, s.Peer().Version)
}
