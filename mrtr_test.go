package mcpvisor_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// A 2026-07-28 server's input_required is resolved through the host's
// typed handlers (Options.Elicitation, Sampling, Roots) and the host sees
// only the final result; what the host cannot answer is an *InputError
// matching ErrInputRequired, which costs the server no strike. A server's
// caching hints show in its status.
func TestSupervisorResolvesInputRequiredThroughItsHandlers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var asked []string
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{
		Logger: zerolog.Nop(),
		Roots:  []protocol.Root{{URI: "file:///home", Name: "home"}},
		Elicitation: func(_ context.Context, server string, req *protocol.ElicitParams) (*protocol.ElicitResult, error) {
			asked = append(asked, server+": "+req.Message)
			return &protocol.ElicitResult{Action: protocol.ElicitAccept, Content: map[string]json.RawMessage{"name": json.RawMessage(`"Ada"`)}}, nil
		},
	})
	require.NoError(t, err)
	defer sup.Close(ctx)
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"fx": {Config: mockserver.Command("-conformance", "-cache-ttl", "45s")},
	}, mcpvisor.AwaitSettled(20*time.Second))
	require.NoError(t, err)

	res, err := sup.CallTool(ctx, "mcp__fx__test_input_required_result_elicitation", nil)
	require.NoError(t, err)
	assert.Equal(t, "Hello, Ada!", res.Content[0].Text)
	assert.Equal(t, []string{"fx: What is your name?"}, asked)
	res, err = sup.CallTool(ctx, "mcp__fx__test_input_required_result_list_roots", nil)
	require.NoError(t, err)
	assert.Equal(t, "Roots: file:///home", res.Content[0].Text)

	// No sampling handler: the call fails, typed, and the server is fine.
	_, err = sup.CallTool(ctx, "mcp__fx__test_input_required_result_sampling", nil)
	var ie *mcpvisor.InputError
	require.ErrorAs(t, err, &ie)
	assert.ErrorIs(t, err, mcpvisor.ErrInputRequired)
	assert.Equal(t, "capital_question", ie.Key)
	assert.Equal(t, mcpvisor.FailureCall, mcpvisor.ClassifyFailure(err))
	st := sup.Status()[0]
	assert.Equal(t, mcpvisor.StateReady, st.State)
	assert.Zero(t, st.Strikes)
	require.NotNil(t, st.Cache)
	assert.Equal(t, protocol.CacheHint{TTLMs: 45_000, Public: true}, st.Cache.Tools)
	require.NotNil(t, st.Capabilities)
	assert.Contains(t, st.Capabilities.Extensions, protocol.ExtensionTasks)

	// A host with no handlers at all: ErrNoInputHandler, still a call
	// failure, never a strike.
	bare, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: zerolog.Nop()})
	require.NoError(t, err)
	defer bare.Close(ctx)
	_, err = bare.SetServers(ctx, map[string]mcpvisor.ServerConfig{"fx": {Config: mockserver.Command("-conformance")}}, mcpvisor.AwaitSettled(20*time.Second))
	require.NoError(t, err)
	for range 4 { // more than the strikes that would close the connection
		_, err = bare.CallTool(ctx, "mcp__fx__test_input_required_result_elicitation", nil)
		assert.ErrorIs(t, err, mcpvisor.ErrNoInputHandler)
		assert.Equal(t, mcpvisor.FailureCall, mcpvisor.ClassifyFailure(err))
	}
	st = bare.Status()[0]
	assert.Equal(t, mcpvisor.StateReady, st.State)
	assert.Zero(t, st.Strikes)
}
