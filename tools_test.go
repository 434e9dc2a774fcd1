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
)

func TestManagementTools(t *testing.T) {
	ctx := t.Context()
	var sup *mcpvisor.Supervisor
	tools := mcpvisor.ManagementTools(func() *mcpvisor.Supervisor { return sup })
	_, err := tools[0].Call(ctx, nil)
	assert.ErrorIs(t, err, mcpvisor.ErrNotStarted)

	sup, err = mcpvisor.Start(ctx, mcpvisor.Options{Builtins: tools})
	require.NoError(t, err)
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, sup.Close(cctx))
	}()
	cfg := mcpvisor.ServerConfig{Config: mockserver.Command("-subscribe", "-resources", "2"), ProtocolVersion: "2025-11-25"}
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{"m": cfg}, mcpvisor.AwaitSettled(20*time.Second))
	require.NoError(t, err)
	events := sup.Subscribe(ctx)

	call := func(name, args string) (string, bool) {
		t.Helper()
		res, err := sup.CallTool(ctx, name, json.RawMessage(args))
		require.NoError(t, err)
		return res.Content[0].Text, res.IsError
	}
	out, isErr := call(mcpvisor.ToolListMcpResources, `{"server":"m"}`)
	require.False(t, isErr, out)
	assert.Contains(t, out, `"uri":"mock://resource/1"`)
	assert.Contains(t, out, `"uriTemplate":"mock://template/{id}"`)

	out, isErr = call(mcpvisor.ToolReadMcpResource, `{"server":"m","uri":"mock://resource/2"}`)
	require.False(t, isErr, out)
	assert.Contains(t, out, "contents of mock://resource/2")
	out, isErr = call(mcpvisor.ToolReadMcpResource, `{"server":"m"}`)
	assert.True(t, isErr)
	assert.Contains(t, out, `"uri" is required`)

	out, isErr = call(mcpvisor.ToolSubscribeMcpResource, `{"server":"m","uri":"mock://resource/1"}`)
	require.False(t, isErr, out)
	assert.Equal(t, []string{"mock://resource/1"}, sup.ResourceSubscriptions("m"))
	_, err = sup.CallTool(ctx, "mcp__m__touch", map[string]string{"uri": "mock://resource/1"})
	require.NoError(t, err)
	for ev := range events {
		if ev, ok := ev.(*mcpvisor.ResourceUpdatedEvent); ok {
			assert.Equal(t, "mock://resource/1", ev.URI)
			break
		}
	}
	out, isErr = call(mcpvisor.ToolUnsubscribeMcpResource, `{"server":"m","uri":"mock://resource/1"}`)
	require.False(t, isErr, out)
	assert.Empty(t, sup.ResourceSubscriptions("m"))

	out, isErr = call(mcpvisor.ToolSubscribePolling, `{"server":"m","uri":"mock://resource/1","intervalMs":100}`)
	require.False(t, isErr, out)
	var poll struct {
		ID         string
		IntervalMs int64
	}
	require.NoError(t, json.Unmarshal([]byte(out), &poll))
	assert.Equal(t, int64(1000), poll.IntervalMs, "raised to the minimum")
	for ev := range events {
		if ev, ok := ev.(*mcpvisor.PollChangedEvent); ok {
			assert.Equal(t, poll.ID, ev.PollID)
			break
		}
	}
	out, isErr = call(mcpvisor.ToolUnsubscribePolling, `{"id":"`+poll.ID+`"}`)
	require.False(t, isErr, out)
	out, isErr = call(mcpvisor.ToolUnsubscribePolling, `{"id":"`+poll.ID+`"}`)
	assert.True(t, isErr)
	assert.Contains(t, out, "unknown polling subscription")
	out, isErr = call(mcpvisor.ToolSubscribePolling, `{}`)
	assert.True(t, isErr, out)
}
