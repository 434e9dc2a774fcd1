package gateway_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// fixtureGateway runs a gateway whose supervisor forwards server requests
// to it (as `supervise` does), over one mock server "fx" with the
// conformance fixtures, progress and subscriptions.
func fixtureGateway(t *testing.T) (*gateway.Gateway, string, *mcpvisor.Supervisor) {
	t.Helper()
	var fwd gateway.Forwarder
	opts := mcpvisor.Options{Logger: zerolog.Nop()}
	fwd.Configure(&opts)
	sup, err := mcpvisor.Start(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(ctx))
	})
	_, err = sup.SetServers(context.Background(), map[string]mcpvisor.ServerConfig{
		"fx": {Config: mockserver.Command("-name", "fx", "-conformance", "-progress", "-subscribe"), ProtocolVersion: protocol.Version20251125},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	g, srv := serve(t, sup, gateway.Options{})
	fwd.Attach(g)
	return g, srv.URL, sup
}

// host connects an mcpvisor host to the gateway with opts.
func host(t *testing.T, url string, opts mcpvisor.Options) *mcpvisor.Supervisor {
	t.Helper()
	opts.Logger = zerolog.Nop()
	h, err := mcpvisor.Start(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, h.Close(ctx))
	})
	_, err = h.SetServers(context.Background(), map[string]mcpvisor.ServerConfig{
		"gw": {Config: httpConfig(url), ProtocolVersion: protocol.Version20251125},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	require.Equal(t, mcpvisor.StateReady, h.Status()[0].State, h.Status()[0].LastError)
	return h
}

// A downstream call with a progress token gets the server's reports,
// under its own token, all before the result.
func TestGatewayProgressPassthrough(t *testing.T) {
	_, url, _ := fixtureGateway(t)
	h := host(t, url, mcpvisor.Options{})
	var mu sync.Mutex
	var got []float64
	res, err := h.CallToolWith(t.Context(), "mcp__gw__fx__progress", map[string]int{"steps": 4, "ms": 5}, mcpvisor.CallOptions{
		Progress: func(p protocol.ProgressParams) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, p.Progress)
			assert.Equal(t, 4.0, *p.Total)
		}})
	require.NoError(t, err)
	assert.Equal(t, "done after 4 steps", res.Content[0].Text)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []float64{1, 2, 3, 4}, got)
}

// A server's sampling and elicitation requests reach the downstream
// client whose call is in flight; without a client that declared the
// capability, the server gets an error that says so.
func TestGatewayForwardsServerRequests(t *testing.T) {
	_, url, _ := fixtureGateway(t)

	plain := host(t, url, mcpvisor.Options{})
	res, err := plain.CallTool(t.Context(), "mcp__gw__fx__test_sampling", map[string]string{"prompt": "hi"})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content[0].Text, "no downstream client")

	var asked []string
	var mu sync.Mutex
	capable := host(t, url, mcpvisor.Options{
		Sampling: func(_ context.Context, server string, req *protocol.CreateMessageParams) (*protocol.CreateMessageResult, error) {
			mu.Lock()
			asked = append(asked, "sampling from "+server)
			mu.Unlock()
			var r protocol.CreateMessageResult
			require.NoError(t, json.Unmarshal([]byte(`{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m"}`), &r))
			return &r, nil
		},
		Elicitation: func(_ context.Context, server string, req *protocol.ElicitParams) (*protocol.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, "elicitation from "+server)
			mu.Unlock()
			return &protocol.ElicitResult{Action: protocol.ElicitAccept, Content: map[string]json.RawMessage{"username": json.RawMessage(`"u"`)}}, nil
		},
	})
	res, err = capable.CallTool(t.Context(), "mcp__gw__fx__test_sampling", map[string]string{"prompt": "hi"})
	require.NoError(t, err)
	require.False(t, res.IsError, res.Content[0].Text)
	assert.Equal(t, "LLM response: sampled", res.Content[0].Text)

	// The SEP-1034 form: the downstream host (an mcpvisor) fills in the
	// defaults of what it did not answer.
	res, err = capable.CallTool(t.Context(), "mcp__gw__fx__test_elicitation_sep1034_defaults", nil)
	require.NoError(t, err)
	require.False(t, res.IsError, res.Content[0].Text)
	assert.Contains(t, res.Content[0].Text, "action=accept")
	assert.Contains(t, res.Content[0].Text, `"age":30`)

	mu.Lock()
	assert.Equal(t, []string{"sampling from gw", "elicitation from gw"}, asked)
	mu.Unlock()
}

// Upstream subscriptions are held while any downstream session wants the
// resource, and released when the last one unsubscribes or goes away.
func TestGatewayCountsSubscriptions(t *testing.T) {
	g, url, up := fixtureGateway(t)
	const uri = "test://watched-resource"
	a := host(t, url, mcpvisor.Options{})
	b := host(t, url, mcpvisor.Options{})
	require.NoError(t, a.Resources().Subscribe(t.Context(), "gw", uri))
	require.NoError(t, b.Resources().Subscribe(t.Context(), "gw", uri))
	assert.Equal(t, map[string][]string{"fx": {uri}}, g.UpstreamSubscriptions())
	assert.Equal(t, []string{uri}, up.Resources().Subscriptions("fx"))

	require.NoError(t, a.Resources().Unsubscribe(t.Context(), "gw", uri))
	assert.Equal(t, []string{uri}, up.Resources().Subscriptions("fx"), "b still wants it")

	// b goes away without unsubscribing: its session ends (DELETE).
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, b.Close(ctx))
	assert.Eventually(t, func() bool { return len(up.Resources().Subscriptions("fx")) == 0 }, 10*time.Second, 10*time.Millisecond)
	assert.Empty(t, g.UpstreamSubscriptions())

	// A resource no server offers.
	err := a.Resources().Subscribe(t.Context(), "gw", "test://nowhere")
	var pe *protocol.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, int64(protocol.CodeInvalidParams), pe.Code)
}

// completion/complete reaches the server of the prompt, by its
// downstream name.
func TestGatewayCompletion(t *testing.T) {
	_, url, _ := fixtureGateway(t)
	h := host(t, url, mcpvisor.Options{})
	res, err := h.Server("gw").Complete(t.Context(), protocol.CompletionReference{Type: protocol.RefPrompt, Name: "mcp__fx__test_prompt_with_arguments"}, protocol.CompletionArgument{Name: "arg1", Value: "par"}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"paris", "park", "party"}, res.Completion.Values)

	_, err = h.Server("gw").Complete(t.Context(), protocol.CompletionReference{Type: protocol.RefPrompt, Name: "nope"}, protocol.CompletionArgument{Name: "a"}, nil)
	var pe *protocol.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, int64(protocol.CodeInvalidParams), pe.Code)
}
