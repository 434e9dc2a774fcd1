package mcpvisor_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// levelsSeen asks a mock's loglevel tool what the server received: the
// level of its session's last logging/setLevel, and the logLevel of the
// call's own _meta.
func levelsSeen(t *testing.T, ctx context.Context, sup *mcpvisor.Supervisor, server string) (setLevel, meta string) {
	t.Helper()
	res, err := sup.Server(server).CallTool(ctx, "loglevel", nil)
	require.NoError(t, err)
	require.NotEmpty(t, res.Content)
	var seen struct{ SetLevel, Meta string }
	require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &seen), res.Content[0].Text)
	return seen.SetLevel, seen.Meta
}

// SetLogLevel reaches a server of a handshake era as logging/setLevel and
// a 2026-07-28 server as the level in the _meta of every later request;
// both keep it across a reconnect. Bad input is a typed error.
func TestSetLogLevelByEra(t *testing.T) {
	t.Parallel()
	ctx := testwait.Context(t)
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	require.NoError(t, err)
	defer sup.Close(ctx)
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"legacy":  {Config: mockserver.Command("-loglevel-tool", "-versions", protocol.Version20251125)},
		"modern":  {Config: mockserver.Command("-loglevel-tool", "-versions", protocol.Version20260728)},
		"silent":  {Config: mockserver.Command("-versions", protocol.Version20250618)}, // no logging capability
		"waiting": {Config: mockserver.Command("-loglevel-tool"), Lazy: true},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)

	set, meta := levelsSeen(t, ctx, sup, "legacy")
	assert.Equal(t, [2]string{"", ""}, [2]string{set, meta}, "nothing asked yet")
	set, meta = levelsSeen(t, ctx, sup, "modern")
	assert.Equal(t, [2]string{"", ""}, [2]string{set, meta}, "nothing asked yet")
	// A call declaring capabilities of its own (a gateway's) has its
	// _meta encoded once and kept: it must not keep a stale level.
	withCaps := func() string {
		t.Helper()
		res, err := sup.CallToolWith(ctx, mcpvisor.QualifiedName("modern", "loglevel"), nil,
			mcpvisor.CallOptions{Capabilities: &protocol.ClientCapabilities{}})
		require.NoError(t, err)
		var seen struct{ Meta string }
		require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &seen))
		return seen.Meta
	}
	assert.Equal(t, "", withCaps())

	require.NoError(t, sup.Server("legacy").SetLogLevel(ctx, protocol.LevelDebug))
	require.NoError(t, sup.Server("modern").SetLogLevel(ctx, protocol.LevelWarning))
	set, meta = levelsSeen(t, ctx, sup, "legacy")
	assert.Equal(t, [2]string{"debug", ""}, [2]string{set, meta}, "logging/setLevel, no _meta")
	set, meta = levelsSeen(t, ctx, sup, "modern")
	assert.Equal(t, [2]string{"", "warning"}, [2]string{set, meta}, "the level in the request's _meta")
	assert.Equal(t, "warning", withCaps(), "a call with its own capabilities carries the new level too")

	// A new connection gets the level again.
	for _, name := range []string{"legacy", "modern"} {
		require.NoError(t, sup.Server(name).Reconnect(ctx))
	}
	require.NoError(t, sup.WaitSettled(ctx))
	set, _ = levelsSeen(t, ctx, sup, "legacy")
	assert.Equal(t, "debug", set, "sent again on the new connection")
	_, meta = levelsSeen(t, ctx, sup, "modern")
	assert.Equal(t, "warning", meta)

	// A lazy server not yet started takes it when it connects.
	require.NoError(t, sup.Server("waiting").SetLogLevel(ctx, protocol.LevelError))
	_, meta = levelsSeen(t, ctx, sup, "waiting")
	assert.Equal(t, "error", meta)

	assert.ErrorIs(t, sup.Server("silent").SetLogLevel(ctx, protocol.LevelInfo), mcpvisor.ErrNoLogging)
	assert.ErrorIs(t, sup.Server("legacy").SetLogLevel(ctx, "loud"), mcpvisor.ErrInvalidLogLevel)
	assert.ErrorIs(t, sup.Server("nobody").SetLogLevel(ctx, protocol.LevelInfo), mcpvisor.ErrUnknownServer)
}

// server-everything (a handshake-era server that declares logging) takes
// logging/setLevel: SetLogLevel returns its answer, which is no error.
func TestSetLogLevelServerEverything(t *testing.T) {
	t.Parallel()
	bin := everything(t)
	ctx := testwait.Context(t)
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	require.NoError(t, err)
	defer sup.Close(ctx)
	cfg := mcpvisor.ServerConfig{}
	cfg.Command = bin
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{"everything": cfg}, mcpvisor.AwaitSettled(60*time.Second))
	require.NoError(t, err)
	st := statusByName(sup)["everything"]
	require.Equal(t, mcpvisor.StateReady, st.State, st.LastError)
	require.NoError(t, sup.Server("everything").SetLogLevel(ctx, protocol.LevelDebug), "the server took logging/setLevel")
	assert.ErrorIs(t, sup.Server("everything").SetLogLevel(ctx, "verbose"), mcpvisor.ErrInvalidLogLevel)
}
