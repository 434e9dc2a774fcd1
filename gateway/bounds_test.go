package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

const pingBody = `{"jsonrpc":"2.0","id":7,"method":"ping"}`

// metric reads one sample of the gateway's /metrics.
func metric(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := client.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(string(b))
	require.NotNil(t, m, "no %s in /metrics", name)
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

// The session cap evicts the longest-idle session, idle ones before busy
// ones; an evicted session's next request gets 404, so its client
// initializes again.
func TestGatewayEvictsTheLongestIdleSession(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	_, srv := serve(t, sup, gateway.Options{MaxSessions: 3})
	clients := make([]*rawClient, 3)
	for i := range clients {
		clients[i] = &rawClient{t: t, url: srv.URL}
		clients[i].initialize()
	}
	resp, _ := clients[0].post(pingBody) // the first is used again: the second is now the longest idle
	require.Equal(t, http.StatusOK, resp.StatusCode)

	fourth := &rawClient{t: t, url: srv.URL}
	fourth.initialize()
	resp, body := clients[1].post(pingBody)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the longest-idle session was evicted")
	assert.Contains(t, body, "session not found: initialize a new one")
	for _, c := range []*rawClient{clients[0], clients[2], fourth} {
		resp, _ := c.post(pingBody)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "the others are kept")
	}
	assert.Equal(t, 1.0, metric(t, srv.URL, "mcpvisor_gateway_sessions_evicted_total"))
	assert.Equal(t, 3.0, metric(t, srv.URL, "mcpvisor_gateway_sessions"))

	// The evicted client initializes again, as the spec tells it to.
	clients[1].session = ""
	clients[1].initialize()
	resp, _ = clients[1].post(pingBody)
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	// A session with a call in flight is kept over idle ones, even when it
	// has been waiting longest.
	busy := clients[2]
	answered := make(chan string, 1)
	go func() {
		_, body := busy.post(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"mcp__a__sleep","arguments":{"ms":1500}}}`)
		answered <- body
	}()
	require.Eventually(t, func() bool { return metric(t, srv.URL, "mcpvisor_gateway_in_flight") == 1 }, 10*time.Second, 5*time.Millisecond)
	for range 3 {
		c := &rawClient{t: t, url: srv.URL}
		c.initialize()
	}
	select {
	case body := <-answered:
		assert.Contains(t, body, `"slept"`, "the busy session's call was not cut off")
	case <-time.After(10 * time.Second):
		t.Fatal("the call on the busy session was not answered in 10 s")
	}
	resp, _ = busy.post(pingBody)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the busy session was kept")
}

// A flood of sessions that are never closed stays within the cap.
func TestGatewaySessionFloodIsBounded(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	_, srv := serve(t, sup, gateway.Options{MaxSessions: 128})
	const flood = 2000
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[string]bool{}
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < flood; i += 8 {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+gateway.MCPPath, strings.NewReader(init))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := client.Do(req)
				if !assert.NoError(t, err) {
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				mu.Lock()
				ids[resp.Header.Get("Mcp-Session-Id")] = true
				mu.Unlock()
			}
		})
	}
	testwait.Call(t, fmt.Sprintf("the %d initializes of the flood", flood), wg.Wait)
	assert.Len(t, ids, flood, "every initialize got a session of its own")
	kept := metric(t, srv.URL, "mcpvisor_gateway_sessions")
	// At the cap, a 64th of it is evicted at once: 2 of 128.
	assert.GreaterOrEqual(t, kept, 127.0)
	assert.LessOrEqual(t, kept, 128.0)
	assert.Equal(t, float64(flood), kept+metric(t, srv.URL, "mcpvisor_gateway_sessions_evicted_total"), "every session is kept or counted evicted")
	assert.Equal(t, int(kept), statusSessions(t, srv.URL))

}

// statusSessions reads the session count of /status.
func statusSessions(t *testing.T, url string) int {
	t.Helper()
	resp, err := client.Get(url + "/status")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`"sessions":\s*(\d+)`).FindStringSubmatch(string(b))
	require.NotNil(t, m, "no sessions in /status: %s", b)
	n, _ := strconv.Atoi(m[1])
	return n
}

// openStream opens a GET stream of a session; the caller closes the
// body. The stream ends with the test (or after a minute), so that no read
// of it can block forever.
func openStream(t *testing.T, url, session string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+gateway.MCPPath, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	resp, err := client.Do(req)
	require.NoError(t, err)
	return resp
}

// A session may hold a few GET streams, not more; an evicted session's
// stream ends.
func TestGatewayCapsStreamsPerSession(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	_, srv := serve(t, sup, gateway.Options{MaxStreamsPerSession: 2, MaxSessions: 1})
	c := &rawClient{t: t, url: srv.URL}
	c.initialize()
	first, second := openStream(t, srv.URL, c.session), openStream(t, srv.URL, c.session)
	defer first.Body.Close()
	defer second.Body.Close()
	require.Equal(t, http.StatusOK, first.StatusCode)
	require.Equal(t, http.StatusOK, second.StatusCode)
	third := openStream(t, srv.URL, c.session)
	require.Equal(t, http.StatusConflict, third.StatusCode, "a third stream is refused")
	b, _ := io.ReadAll(third.Body)
	third.Body.Close()
	assert.Contains(t, string(b), "2 GET streams open already")
	assert.Equal(t, 1.0, metric(t, srv.URL, "mcpvisor_gateway_streams_refused_total"))

	second.Body.Close()
	require.Eventually(t, func() bool {
		resp := openStream(t, srv.URL, c.session)
		ok := resp.StatusCode == http.StatusOK
		if !ok {
			resp.Body.Close()
		} else {
			t.Cleanup(func() { resp.Body.Close() })
		}
		return ok
	}, 10*time.Second, 20*time.Millisecond, "a closed stream frees its place")

	// The cap is one session: a new one evicts this one (busy as it is,
	// it is the only one), and its streams end.
	ended := make(chan error, 1)
	go func() {
		br := bufio.NewReader(first.Body)
		for {
			if _, err := br.ReadString('\n'); err != nil {
				ended <- err
				return
			}
		}
	}()
	other := &rawClient{t: t, url: srv.URL}
	other.initialize()
	select {
	case err := <-ended:
		assert.ErrorIs(t, err, io.EOF, "the evicted session's stream ended cleanly")
	case <-time.After(10 * time.Second):
		t.Fatal("the evicted session's GET stream did not end within 10 s")
	}
	resp, _ := c.post(pingBody)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}
