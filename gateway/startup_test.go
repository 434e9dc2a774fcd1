package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// startingSupervisor starts a supervisor and configures servers without
// waiting for them, as `supervise` does before it serves: the clients
// come while the servers are still starting.
func startingSupervisor(t *testing.T, opts mcpvisor.Options, servers map[string]mcpvisor.ServerConfig) *mcpvisor.Supervisor {
	t.Helper()
	ctx := context.Background()
	opts.Logger = zerolog.Nop()
	sup, err := mcpvisor.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(cctx))
	})
	_, err = sup.SetServers(ctx, servers)
	require.NoError(t, err)
	return sup
}

// toolNames lists the tools once, as an agent host does at start.
func toolNames(t *testing.T, c *channelClient) []string {
	t.Helper()
	a := c.rpc(`{"jsonrpc":"2.0","id":100,"method":"tools/list"}`)
	require.Nil(t, a.Error)
	var res protocol.ListToolsResult
	require.NoError(t, json.Unmarshal(a.Result, &res))
	var out []string
	for _, tool := range res.Tools {
		out = append(out, tool.Name)
	}
	return out
}

// A client that connects while the servers are still starting and lists
// once sees every server that gets ready within the start-up window,
// with the servers that failed, are disabled or lazy not holding the
// list back; with no window it sees only those ready by then (the
// behaviour a zero StartupWait keeps). Before the window existed, a
// client listing at once saw 1 tool of a pool of many.
func TestAClientThatListsDuringStartUpSeesTheWholePool(t *testing.T) {
	t.Parallel()
	failing := mcpvisor.ServerConfig{Config: transports.Config{Command: "sh", Args: []string{"-c", "sleep 1; echo cannot start >&2; exit 3"}}}
	lazy := mcpvisor.ServerConfig{Config: mockserver.Command("-name", "lazy"), Lazy: true}
	servers := func() map[string]mcpvisor.ServerConfig {
		return map[string]mcpvisor.ServerConfig{
			"fast":     {Config: mockserver.Command("-name", "fast")},
			"slow":     {Config: mockserver.Command("-name", "slow", "-init-delay", "3s")},
			"slower":   {Config: mockserver.Command("-name", "slower", "-init-delay", "5s")},
			"broken":   failing,
			"disabled": {Config: mockserver.Command(), Disabled: true},
			"lazy":     lazy,
		}
	}
	opts := mcpvisor.Options{Reconnect: mcpvisor.ReconnectPolicy{MaxAttempts: -1}}

	t.Run("window", func(t *testing.T) {
		sup := startingSupervisor(t, opts, servers())
		g, srv := serve(t, sup, gateway.Options{StartupWait: time.Minute})
		g.ServersConfigured()
		c := newChannelClient(t, srv.URL)
		names := toolNames(t, c)
		for _, want := range []string{"fast__echo", "slow__echo", "slower__echo"} {
			assert.Contains(t, names, want, "listed once, during start-up")
		}
		for _, server := range []string{"fast", "slow", "slower"} {
			res, perr := c.call(server+"__echo", map[string]any{"text": server})
			require.Nil(t, perr, "%s: %+v", server, perr)
			assert.Equal(t, server, res.Content[0].Text)
		}
		// Later lists answer at once; prompts and resources pass the
		// same gate.
		for _, method := range []string{"prompts/list", "resources/list", "resources/templates/list"} {
			a := c.rpc(`{"jsonrpc":"2.0","id":7,"method":"` + method + `"}`)
			require.Nil(t, a.Error, method)
		}
	})
	t.Run("no window", func(t *testing.T) {
		sup := startingSupervisor(t, opts, servers())
		g, srv := serve(t, sup, gateway.Options{})
		g.ServersConfigured()
		c := newChannelClient(t, srv.URL)
		assert.NotContains(t, toolNames(t, c), "slower__echo", "without a window the list answers at once, before a server that takes 5 s")
	})
}

// A call to a tool of a server still starting waits for it within the
// call's deadline (here through the gateway, before any list); a server
// that fails to start fails the call with "server not ready" naming the
// server, its state and its error; a name no configured server could
// offer is "unknown tool" at once. Before, all three were "unknown tool".
func TestACallDuringStartUpWaitsForItsServer(t *testing.T) {
	t.Parallel()
	failing := mcpvisor.ServerConfig{Config: transports.Config{Command: "sh", Args: []string{"-c", "sleep 1; echo cannot start >&2; exit 3"}}}
	sup := startingSupervisor(t, mcpvisor.Options{Reconnect: mcpvisor.ReconnectPolicy{MaxAttempts: -1}}, map[string]mcpvisor.ServerConfig{
		"slow":   {Config: mockserver.Command("-name", "slow", "-init-delay", "2s")},
		"broken": failing,
	})
	_, srv := serve(t, sup, gateway.Options{}) // no start-up window: the call waits by itself
	c := newChannelClient(t, srv.URL)

	for _, name := range []string{"nosuch__echo", "mcp__nosuch__echo"} {
		_, perr := c.call(name, map[string]any{"text": "x"})
		require.NotNil(t, perr, name)
		assert.Equal(t, int64(protocol.CodeInvalidParams), perr.Code, name)
		assert.Contains(t, perr.Message, "unknown tool", name)
	}
	assert.NotEqual(t, mcpvisor.StateReady, statusNamed(sup, "slow").State, "answered without waiting for the servers")

	// By its downstream (short) name, and by its pool name.
	res, perr := c.call("slow__echo", map[string]any{"text": "early"})
	require.Nil(t, perr, "%+v", perr)
	assert.Equal(t, "early", res.Content[0].Text)
	res, perr = c.call("mcp__slow__add", map[string]any{"a": 1, "b": 2})
	require.Nil(t, perr, "%+v", perr)
	assert.Equal(t, "3", res.Content[0].Text)

	_, perr = c.call("broken__echo", map[string]any{"text": "x"})
	require.NotNil(t, perr)
	assert.Equal(t, int64(gateway.CodeServerNotReady), perr.Code, perr.Message)
	assert.Contains(t, perr.Message, `server "broken" is failed`)
	assert.Contains(t, perr.Message, "cannot start", "the server's last error")
	var data struct {
		Server string `json:"server"`
	}
	require.NoError(t, json.Unmarshal(perr.Data, &data))
	assert.Equal(t, "broken", data.Server)
}

// A list waiting for the servers during start-up does not hold a shutdown
// up: Drain lets it answer with the pool as it is.
func TestDrainAnswersAListWaitingForStartUp(t *testing.T) {
	sup := startingSupervisor(t, mcpvisor.Options{}, map[string]mcpvisor.ServerConfig{
		"never": {Config: mockserver.Command("-name", "never", "-init-delay", "1m")},
	})
	g, srv := serve(t, sup, gateway.Options{StartupWait: time.Hour})
	g.ServersConfigured()
	c := newChannelClient(t, srv.URL)
	listed := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+gateway.MCPPath, strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.session)
		resp, err := client.Do(req)
		if err != nil {
			listed <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		listed <- string(b)
	}()
	ctx := testwait.Context(t)
	for g.InFlight() == 0 { // the list is being served: waiting at the gate
		require.NoError(t, ctx.Err(), "waiting for the list to arrive")
		time.Sleep(time.Millisecond) // testwait:ok polling a counter, bounded by ctx
	}
	dctx, cancel := context.WithTimeout(ctx, testwait.Patience)
	defer cancel()
	require.True(t, g.Drain(dctx), "the waiting list finished")
	body := testwait.Recv(t, listed, "the list's answer")
	assert.Contains(t, body, `"tools"`)
	assert.NotContains(t, body, "never__echo")
}
