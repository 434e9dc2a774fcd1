package mcpvisor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
)

// A host that calls a tool as soon as it has configured its servers (an
// agent host that lists once at start, or a client of the gateway that
// knows its names) reaches a server still starting: the call waits for
// the server and succeeds. It failed at once with ErrUnknownTool, since
// the pool holds none of a server's names before it has listed them.
func TestACallToAServerStillStartingWaitsForIt(t *testing.T) {
	t.Parallel()
	s := start(t, testOptions)
	ctx := testwait.Context(t)
	_, err := s.SetServers(ctx, map[string]ServerConfig{"slow": mock("-name", "slow", "-init-delay", "2s")})
	require.NoError(t, err)
	require.NotEqual(t, StateReady, statusOf(s, "slow").State, "the server takes 2 s to answer initialize")
	require.False(t, hasTool(s, "mcp__slow__echo"))

	res, err := s.CallTool(ctx, "mcp__slow__echo", json.RawMessage(`{"text":"early"}`))
	require.NoError(t, err, "the call waits for the server to be ready")
	assert.Equal(t, "early", res.Content[0].Text)
	assert.Equal(t, StateReady, statusOf(s, "slow").State)
}

// A call to a server still starting that does not get ready by the
// call's deadline fails with the typed not-ready error naming the
// server's state, never with ErrUnknownTool; a name no configured server
// could offer is ErrUnknownTool at once, without waiting for the servers
// still starting.
func TestACallToAServerStillStartingFailsNotReadyAtItsDeadline(t *testing.T) {
	s := start(t, testOptions)
	ctx := testwait.Context(t)
	_, err := s.SetServers(ctx, map[string]ServerConfig{"slow": mock("-name", "slow", "-init-delay", "1m")})
	require.NoError(t, err)

	_, err = s.CallTool(ctx, "mcp__nosuch__echo", nil)
	require.ErrorIs(t, err, ErrUnknownTool, "no configured server has the prefix mcp__nosuch__")
	require.NotErrorIs(t, err, ErrServerNotReady)

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = s.CallTool(short, "mcp__slow__echo", json.RawMessage(`{"text":"x"}`))
	var nre *NotReadyError
	require.ErrorAs(t, err, &nre, "a server still starting is not an unknown tool")
	assert.Equal(t, "slow", nre.Server)
	assert.Contains(t, []State{StatePending, StateConnecting}, nre.State)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "it waited up to the call's deadline")
	assert.NotErrorIs(t, err, ErrUnknownTool)
}

// A server that fails to start while a call waits for it fails the call
// with the typed not-ready error carrying its state and last error, as
// soon as it parks (not after one more attempt woken by the call).
func TestACallToAServerThatFailsToStartGetsItsError(t *testing.T) {
	opts := testOptions
	opts.Reconnect.MaxAttempts = -1 // park at the first failure
	s := start(t, opts)
	ctx := testwait.Context(t)
	failing := ServerConfig{Config: transports.Config{Command: "sh", Args: []string{"-c", "sleep 1; echo cannot start >&2; exit 3"}}}
	_, err := s.SetServers(ctx, map[string]ServerConfig{"bad": failing})
	require.NoError(t, err)
	h, err := s.handle("bad")
	require.NoError(t, err)
	require.False(t, h.view.Load().state.Parked(), "the server takes a second to fail")

	_, err = s.CallTool(ctx, "mcp__bad__echo", nil)
	var nre *NotReadyError
	require.ErrorAs(t, err, &nre, "a server that failed to start is not an unknown tool")
	assert.Equal(t, "bad", nre.Server)
	assert.Equal(t, StateFailed, nre.State)
	require.Error(t, nre.Cause, "the server's last error")
	assert.Nil(t, nre.Waited, "the call did not wait for its deadline")
	assert.NotErrorIs(t, err, ErrUnknownTool)
	assert.Equal(t, uint64(1), h.view.Load().gen, "the call woke no second attempt: %s", err)
}
