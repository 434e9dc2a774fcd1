package mcpvisor_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/testserver"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
)

// The library must never write to stdout: a host may itself be a stdio
// MCP server, and one stray line corrupts its protocol stream.
func TestNothingIsWrittenToStdout(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	saved := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = saved }()

	ctx := context.Background()
	log := zerolog.New(io.Discard).Level(zerolog.DebugLevel) // every log path runs
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: log})
	require.NoError(t, err)
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"ok":      {Config: mockserver.Command("-garbage")},
		"dies":    {Config: mockserver.Command("-exit-after", "1")},
		"missing": {Config: transports.Config{Command: "mcpvisor-no-such-server"}},
	})
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, sup.WaitSettled(wctx))
	_, err = sup.CallTool(ctx, "mcp__ok__echo", json.RawMessage(`{"text":"x"}`))
	require.NoError(t, err)
	sup.CallTool(ctx, "mcp__dies__echo", nil)
	sup.CallTool(ctx, "mcp__dies__echo", nil)
	require.NoError(t, sup.Close(wctx))

	os.Stdout = saved
	w.Close()
	out := testwait.Result(t, "the end of what was written to stdout", func() []byte { b, _ := io.ReadAll(r); return b })
	assert.Empty(t, string(out))
}

func TestCallToolArguments(t *testing.T) {
	ctx := context.Background()
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	require.NoError(t, err)
	defer sup.Close(ctx)
	sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{"m": {Config: testserver.Command()}})
	require.NoError(t, sup.WaitSettled(ctx))

	for _, args := range []any{
		json.RawMessage(`{"text":"hi"}`),
		[]byte(`{"text":"hi"}`),
		map[string]string{"text": "hi"},
		struct {
			Text string `json:"text"`
		}{"hi"},
	} {
		out, err := sup.CallTool(ctx, "mcp__m__echo", args)
		require.NoError(t, err)
		assert.Equal(t, "hi", out.Content[0].Text)
	}
	_, err = sup.CallTool(ctx, "mcp__m__echo", func() {})
	assert.Error(t, err, "arguments that do not encode are refused before sending")

	_, err = sup.CallTool(ctx, "mcp__nope__echo", nil)
	assert.ErrorIs(t, err, mcpvisor.ErrUnknownTool)
	assert.ErrorIs(t, sup.Server("nope").Reconnect(ctx), mcpvisor.ErrUnknownServer)
}

func TestStartWithAnEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	assert.True(t, errors.Is(err, context.Canceled))
}

// SetServers can return at once, or wait until every server has settled
// for as long as the caller allows; servers still connecting then are
// named, and go on connecting.
func TestSetServersCanAwaitSettled(t *testing.T) {
	ctx := context.Background()
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	require.NoError(t, err)
	defer sup.Close(ctx)

	// quick has 2 s to be ready: the first stdio server also waits for the
	// process helper's start (a race-enabled binary here, a few hundred ms
	// on a loaded machine).
	res, err := sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"quick": {Config: mockserver.Command()},
		"slow":  {Config: mockserver.Command("-init-delay", "5s")},
		"lazy":  {Config: mockserver.Command(), Lazy: true},
	}, mcpvisor.AwaitSettled(2*time.Second))
	require.NoError(t, err, "a wait that ends first is not an error")
	assert.False(t, res.Settled)
	assert.Equal(t, []string{"slow"}, res.Unsettled, "lazy servers wait for first use; only the slow one is still connecting")
	assert.Equal(t, mcpvisor.StateReady, statusOf(sup, "quick").State)

	res, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"quick": {Config: mockserver.Command()},
		"slow":  {Config: mockserver.Command("-init-delay", "5s")},
		"lazy":  {Config: mockserver.Command(), Lazy: true},
	}, mcpvisor.AwaitSettled(0))
	require.NoError(t, err)
	assert.True(t, res.Settled)
	assert.Empty(t, res.Unsettled)
	assert.Equal(t, []string{"lazy", "quick", "slow"}, res.Unchanged)
	assert.Equal(t, mcpvisor.StateReady, statusOf(sup, "slow").State)
	assert.Equal(t, mcpvisor.StatePending, statusOf(sup, "lazy").State)
}

func statusOf(sup *mcpvisor.Supervisor, name string) mcpvisor.ServerStatus {
	for _, st := range sup.Status() {
		if st.Name == name {
			return st
		}
	}
	return mcpvisor.ServerStatus{}
}
