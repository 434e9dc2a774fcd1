package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// openGetStream opens session's GET stream (resuming after lastEventID
// when it is not empty) and returns its lines once the headers are in.
func openGetStream(t *testing.T, url, session, lastEventID string) *testwait.LineReader {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url+gateway.MCPPath, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := streamClient.Do(req)
	require.NoError(t, err, "opening the GET stream")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return testwait.NewLineReader(t, resp.Body)
}

// awaitToolsChanged waits until the supervisor has published a
// tools_changed event after sequence number after.
func awaitToolsChanged(t *testing.T, sup *mcpvisor.Supervisor, after uint64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := sup.Subscribe(ctx, mcpvisor.FromSequence(after))
	for {
		ev := testwait.Recv(t, events, "the supervisor's tools_changed event")
		if ev.Header().Type == mcpvisor.EventToolsChanged {
			return
		}
	}
}

// The gateway holds its bus subscription from New: a list change
// published while a client's GET stream is open, but before the gateway's
// event loop has started (or caught up), still reaches the stream. (Run
// used to subscribe when it started: what the supervisor published before
// was lost, and a client waited forever on a stream that had answered
// 200.)
func TestGatewayGetStreamGetsEventsPublishedBeforeRun(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	g := gateway.New(sup, gateway.Options{})
	srv := httptest.NewServer(g.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	t.Cleanup(func() {
		g.Close()
		srv.Close()
		cancel()
		testwait.Done(t, ran, "the gateway's Run to return")
	})
	c := &rawClient{t: t, url: srv.URL}
	c.initialize()
	stream := openGetStream(t, srv.URL, c.session, "")

	seq, err := sup.LastSeq(testwait.Context(t))
	require.NoError(t, err)
	_, err = sup.CallTool(testwait.Context(t), "mcp__a__announce", map[string]any{"text": "early"})
	require.NoError(t, err)
	awaitToolsChanged(t, sup, seq)

	go func() {
		defer close(ran)
		g.Run(ctx, time.Millisecond)
	}()
	ev := stream.Event("tools/list_changed on the GET stream, published before Run started")
	assert.Equal(t, "1", ev.ID)
	assert.Contains(t, ev.Data, protocol.NotificationToolsListChanged)
}

// Opening a fresh gateway, session and GET stream and at once changing
// the pool, a thousand times: every change reaches its stream. (Each
// change adds a tool; the thousand are spread over ten supervisors so that
// the pool, whose rebuilds the registry spaces by their cost, stays
// small.)
func TestGatewayGetStreamLosesNothing(t *testing.T) {
	const batches, perBatch = 10, 100
	for b := range batches {
		t.Run(fmt.Sprintf("batch%d", b), func(t *testing.T) {
			sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
			for i := range perBatch {
				openAndAnnounce(t, sup, fmt.Sprintf("t%d_%03d", b, i))
			}
		})
	}
}

// openAndAnnounce starts a gateway over sup, opens a session and its GET
// stream, adds a tool behind the gateway and reads the list change from
// the stream; then it shuts that gateway down.
func openAndAnnounce(t *testing.T, sup *mcpvisor.Supervisor, tool string) {
	t.Helper()
	g := gateway.New(sup, gateway.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		g.Run(ctx, time.Millisecond)
	}()
	srv := httptest.NewServer(g.Handler())
	defer func() {
		g.Close()
		srv.Close()
		cancel()
		testwait.Done(t, ran, "the gateway's Run to return")
	}()
	c := &rawClient{t: t, url: srv.URL}
	c.initialize()
	stream := openGetStream(t, srv.URL, c.session, "")
	_, err := sup.CallTool(testwait.Context(t), "mcp__a__announce", map[string]any{"text": tool})
	require.NoError(t, err)
	ev := stream.Event("tools/list_changed on the GET stream after adding " + tool)
	require.Equal(t, "1", ev.ID, "adding %s", tool)
	require.Contains(t, ev.Data, protocol.NotificationToolsListChanged, "adding %s", tool)
}

// metricsText returns the gateway's /metrics page.
func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := client.Get(url + "/metrics")
	require.NoError(t, err, "GET /metrics")
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "reading /metrics")
	return string(b)
}
