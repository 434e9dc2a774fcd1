package gateway_test

import (
	"context"
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
)

// A long blocking call through the gateway: a single-threaded stdio
// server (the mock's block tool reads and answers nothing meanwhile, not
// even ping) works for 6 s, 20 times the liveness probes' ProbeAfter and
// about 5 times what they need to strike a silent server out (300 ms +
// 3 × 200 ms); the call is answered, the server is not restarted, and
// the client's stream stays alive meanwhile: the answer turns into an
// event stream whose headers come at the first keep-alive (500 ms here)
// and that gets a comment line every keep-alive until the result. The
// client gives up on a response whose headers take more than 3 s, as
// undici (Node's fetch) does after 300 s.
func TestGatewayLongBlockingCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: zerolog.Nop(), Reconnect: mcpvisor.ReconnectPolicy{
		ProbeAfter: mcpvisor.Duration(300 * time.Millisecond), ProbeTimeout: mcpvisor.Duration(200 * time.Millisecond)}})
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(cctx))
	})
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{"busy": {Config: mockserver.Command("-block-tool")}}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	before := statusNamed(sup, "busy")
	require.Equal(t, mcpvisor.StateReady, before.State)

	_, srv := serve(t, sup, gateway.Options{KeepAlive: 500 * time.Millisecond})
	c := &rawClient{t: t, url: srv.URL}
	c.initialize()

	req, err := http.NewRequest(http.MethodPost, srv.URL+gateway.MCPPath,
		strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mcp__busy__block","arguments":{"ms":6000}}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.session)
	impatient := &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 3 * time.Second}, Timeout: 60 * time.Second}
	start := time.Now()
	resp, err := impatient.Do(req)
	require.NoError(t, err, "the headers come before the client gives up")
	defer resp.Body.Close()
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, 6*time.Second, "answered when the server was done")
	assert.GreaterOrEqual(t, strings.Count(string(body), ": keepalive\n\n"), 5, "a comment line every keep-alive: %s", body)
	assert.Contains(t, string(body), `"blocked"`, "the result")
	assert.Contains(t, string(body), `"id":7`)

	after := statusNamed(sup, "busy")
	assert.Equal(t, mcpvisor.StateReady, after.State)
	assert.Equal(t, before.ConnectedSince, after.ConnectedSince, "not restarted")
	assert.Zero(t, after.Strikes)
}

func statusNamed(sup *mcpvisor.Supervisor, name string) mcpvisor.ServerStatus {
	for _, st := range sup.Status() {
		if st.Name == name {
			return st
		}
	}
	return mcpvisor.ServerStatus{}
}
