package gateway_test

import (
	"bytes"
	"context"
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
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// sealedReplica is a gateway over a supervisor of its own (with the
// mock server fx that takes resource subscriptions), sealing its
// sessions with seal: one replica of a deployment.
func sealedReplica(t *testing.T, seal mcpserver.SealOptions) (*gateway.Gateway, string, *mcpvisor.Supervisor) {
	t.Helper()
	sup, err := mcpvisor.Start(context.Background(), mcpvisor.Options{Logger: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(ctx))
	})
	_, err = sup.SetServers(context.Background(), map[string]mcpvisor.ServerConfig{
		"fx": {Config: mockserver.Command("-name", "fx", "-conformance", "-subscribe"), ProtocolVersion: protocol.Version20251125},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	g, srv := serve(t, sup, gateway.Options{SessionSeal: seal})
	return g, srv.URL + gateway.MCPPath, sup
}

// A session that subscribed to a resource on replica A, taken up by
// replica B from its sealed id, has B subscribe upstream too (its own
// server's subscription), and B releases it when the session is deleted
// there.
func TestSealedSessionSubscriptionsFollowIt(t *testing.T) {
	seal := mcpserver.SealOptions{Keys: []mcpserver.SealKey{{Secret: bytes.Repeat([]byte{7}, mcpserver.SealKeySize)}},
		Store: &mcpserver.MemorySessionStore{}}
	_, urlA, upA := sealedReplica(t, seal)
	gB, urlB, upB := sealedReplica(t, seal)
	const uri = "test://watched-resource"

	send := func(method, url, session, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set(mcpserver.HeaderSessionID, session)
			req.Header.Set(mcpserver.HeaderProtocolVersion, protocol.Version20251125)
		}
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	resp := send(http.MethodPost, urlA, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	id := resp.Header.Get(mcpserver.HeaderSessionID)
	require.Equal(t, http.StatusAccepted, send(http.MethodPost, urlA, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).StatusCode)
	require.Equal(t, http.StatusOK, send(http.MethodPost, urlA, id, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"`+uri+`"}}`).StatusCode)
	assert.Equal(t, []string{uri}, upA.Resources().Subscriptions("fx"))
	assert.Empty(t, upB.Resources().Subscriptions("fx"))

	require.Equal(t, http.StatusOK, send(http.MethodPost, urlB, id, `{"jsonrpc":"2.0","id":3,"method":"ping"}`).StatusCode, "B takes the session up")
	require.Eventually(t, func() bool { return len(upB.Resources().Subscriptions("fx")) == 1 }, 10*time.Second, 10*time.Millisecond,
		"B subscribes upstream for the session it took up")
	assert.Equal(t, map[string][]string{"fx": {uri}}, gB.UpstreamSubscriptions())

	require.Equal(t, http.StatusOK, send(http.MethodDelete, urlB, id, "").StatusCode)
	require.Eventually(t, func() bool { return len(upB.Resources().Subscriptions("fx")) == 0 }, 10*time.Second, 10*time.Millisecond,
		"B releases the upstream subscription of the deleted session")
	assert.Equal(t, http.StatusNotFound, send(http.MethodPost, urlB, id, `{"jsonrpc":"2.0","id":4,"method":"ping"}`).StatusCode)
}
