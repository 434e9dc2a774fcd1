package mcpvisor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
)

// A host that calls right after SetServers, without AwaitSettled, reaches
// servers still starting: CallTool and Server(name).CallTool wait for them
// within ctx and succeed; a server that fails to start is the typed
// *NotReadyError with its state and last error; a name no configured
// server could offer is ErrUnknownTool at once. (Before, all of these
// were ErrUnknownTool.)
func TestCallsRightAfterSetServersWaitForTheServers(t *testing.T) {
	t.Parallel()
	ctx := testwait.Context(t)
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: zerolog.Nop(), Reconnect: mcpvisor.ReconnectPolicy{MaxAttempts: -1}})
	require.NoError(t, err)
	defer sup.Close(context.Background())
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"slow":   {Config: mockserver.Command("-name", "slow", "-init-delay", "2s")},
		"slower": {Config: mockserver.Command("-name", "slower", "-init-delay", "3s")},
		"broken": {Config: transports.Config{Command: "sh", Args: []string{"-c", "sleep 1; echo cannot start >&2; exit 3"}}},
		"never":  {Config: mockserver.Command("-name", "never", "-init-delay", "1m")},
	})
	require.NoError(t, err)

	_, err = sup.CallTool(ctx, "mcp__nosuch__echo", nil)
	require.ErrorIs(t, err, mcpvisor.ErrUnknownTool)
	_, err = sup.Server("nosuch").CallTool(ctx, "echo", nil)
	require.ErrorIs(t, err, mcpvisor.ErrUnknownTool)
	assert.NotEqual(t, mcpvisor.StateReady, statusOf(sup, "slow").State, "unknown at once, without waiting for the servers")

	res, err := sup.CallTool(ctx, "mcp__slow__echo", map[string]string{"text": "a"})
	require.NoError(t, err, "CallTool waits for the server still starting")
	assert.Equal(t, "a", res.Content[0].Text)
	res, err = sup.Server("slower").CallTool(ctx, "echo", map[string]string{"text": "b"})
	require.NoError(t, err, "Server(name).CallTool waits for the server still starting")
	assert.Equal(t, "b", res.Content[0].Text)

	_, err = sup.Server("broken").CallTool(ctx, "echo", nil)
	var nre *mcpvisor.NotReadyError
	require.ErrorAs(t, err, &nre)
	assert.Equal(t, "broken", nre.Server)
	assert.Equal(t, mcpvisor.StateFailed, nre.State)
	require.Error(t, nre.Cause)
	assert.Contains(t, nre.Cause.Error(), "cannot start")
	assert.False(t, errors.Is(err, mcpvisor.ErrUnknownTool))

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = sup.CallTool(short, "mcp__never__echo", nil)
	require.ErrorAs(t, err, &nre, "still starting when the call's deadline passed")
	assert.Equal(t, "never", nre.Server)
	assert.ErrorIs(t, nre.Waited, context.DeadlineExceeded)
	assert.ErrorIs(t, err, mcpvisor.ErrServerNotReady)
}
