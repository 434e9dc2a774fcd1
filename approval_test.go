package mcpvisor_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/config"
	"github.com/mcpvisor/mcpvisor/trust"
)

// markerProject writes a project .mcp.json whose server touches marker
// before it becomes a mock server, and returns the project directory.
func markerProject(t *testing.T, marker string, extraArg string) string {
	t.Helper()
	dir := t.TempDir()
	mock := mockserver.Command()
	entry := map[string]any{
		"command": "sh",
		"args":    []string{"-c", `touch "$0" && exec "$1"`, marker, mock.Command, extraArg},
		"env":     mock.Env,
	}
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"innocent": entry}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".mcp.json"), b, 0o600))
	return dir
}

func TestAHeldServerIsShownAndNeverStarted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	marker := filepath.Join(t.TempDir(), "PWNED")
	dir := markerProject(t, marker, "-name=v1")
	store := trust.NewStore(t.TempDir(), nil)
	load := func() *config.Config {
		t.Helper()
		cfg, err := config.Load(config.Options{Home: t.TempDir(), Dir: dir,
			ManagedFile: filepath.Join(t.TempDir(), "none"), Approvals: store})
		require.NoError(t, err)
		return cfg
	}
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	require.NoError(t, err)
	defer sup.Close(ctx)
	events := sup.Subscribe(ctx, mcpvisor.FromSequence(0))

	cfg := load()
	res, err := sup.SetServers(ctx, cfg.Servers, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	assert.True(t, res.Settled, "a held server is settled: it waits for nothing the supervisor can do")
	st := statusOf(sup, "innocent")
	assert.Equal(t, mcpvisor.StateNeedsApproval, st.State)
	assert.Contains(t, st.LastError, `needs approval: "project" layer entry`)
	assert.Equal(t, "stdio", st.Transport)
	ev := nextEvent(t, events, func(ev mcpvisor.Event) bool { return serverState(ev, "innocent") != nil }).(*mcpvisor.ServerStateEvent)
	assert.Equal(t, mcpvisor.StateNeedsApproval, ev.State)
	assert.Contains(t, ev.Err, "is not approved")

	// Nothing wakes it: not a reconnect, a toggle, a call or a ping.
	assert.ErrorIs(t, sup.Server("innocent").Reconnect(ctx), mcpvisor.ErrNeedsApproval)
	require.NoError(t, sup.ReconnectAll(ctx), "reconnecting all skips it")
	assert.Error(t, sup.Server("innocent").Toggle(ctx, true))
	_, err = sup.CallTool(ctx, "mcp__innocent__echo", nil)
	assert.ErrorIs(t, err, mcpvisor.ErrServerNotReady, "a call by one of its names says why it cannot run")
	assert.ErrorIs(t, err, mcpvisor.ErrNeedsApproval)
	err = sup.Server("innocent").Ping(ctx)
	assert.ErrorIs(t, err, mcpvisor.ErrServerNotReady)
	assert.ErrorIs(t, err, mcpvisor.ErrNeedsApproval)
	require.NoError(t, sup.WaitSettled(ctx))
	assert.NoFileExists(t, marker, "the held command never ran")

	// Approved: it starts.
	approval, err := cfg.Approval("innocent")
	require.NoError(t, err)
	require.NoError(t, store.Approve(ctx, approval))
	res, err = sup.SetServers(ctx, load().Servers, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	assert.Equal(t, []string{"innocent"}, res.Reconnected)
	assert.Equal(t, mcpvisor.StateReady, statusOf(sup, "innocent").State)
	assert.FileExists(t, marker)
	_, err = sup.CallTool(ctx, "mcp__innocent__echo", map[string]string{"text": "hi"})
	require.NoError(t, err)

	// One argument changes: held again, and the running one is stopped.
	require.NoError(t, os.Remove(marker))
	dir2 := markerProject(t, marker, "-name=v2")
	b, err := os.ReadFile(filepath.Join(dir2, ".mcp.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".mcp.json"), b, 0o600))
	cfg = load()
	require.True(t, cfg.Pending["innocent"].Changed)
	_, err = sup.SetServers(ctx, cfg.Servers, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	st = statusOf(sup, "innocent")
	assert.Equal(t, mcpvisor.StateNeedsApproval, st.State)
	assert.Contains(t, st.LastError, "changed since it was approved")
	assert.Zero(t, st.OfferedTools)
	_, err = sup.CallTool(ctx, "mcp__innocent__echo", map[string]string{"text": "hi"})
	assert.Error(t, err)
	assert.NoFileExists(t, marker)
}

// nextEvent returns the first event that matches, or fails after 10 s.
func nextEvent(t *testing.T, events <-chan mcpvisor.Event, match func(mcpvisor.Event) bool) mcpvisor.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "the event stream closed while waiting for an event")
			if match(ev) {
				return ev
			}
		case <-deadline:
			require.FailNow(t, "no matching event within 10 s")
		}
	}
}

// serverState returns ev when it is a state change of server, else nil.
func serverState(ev mcpvisor.Event, server string) *mcpvisor.ServerStateEvent {
	if s, ok := ev.(*mcpvisor.ServerStateEvent); ok && s.Server == server {
		return s
	}
	return nil
}
