package gateway_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/testserver"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// polledEvent is one event of an event stream.
type polledEvent struct{ id, retry, data string }

// readEvents reads the events of an event stream to its end.
func readEvents(t *testing.T, resp *http.Response) []polledEvent {
	t.Helper()
	var events []polledEvent
	var ev polledEvent
	seen := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if seen {
				events = append(events, ev)
			}
			ev, seen = polledEvent{}, false
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.id, seen = line[4:], true
		case strings.HasPrefix(line, "retry: "):
			ev.retry, seen = line[7:], true
		case strings.HasPrefix(line, "data: "):
			ev.data, seen = line[6:], true
		case strings.HasPrefix(line, "event: "):
			seen = true
		}
	}
	require.NoError(t, sc.Err(), "reading the event stream to its end")
	return events
}

// A tools/call of a 2025-11-25 session that runs longer than
// SSEPollAfter has its POST stream ended after a priming event (an id,
// the retry field, no data); a GET with that Last-Event-ID gets the
// answer, and the stream then ends (SEP-1699). A quick call, and a
// session of an earlier version, are answered on the POST.
func TestLongCallIsPolled(t *testing.T) {
	t.Parallel()
	_, url := testserver.Serve(t, testserver.Options{})
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"t": {Config: transports.Config{URL: url}}})
	_, srv := serve(t, sup, gateway.Options{SSEPollAfter: 100 * time.Millisecond, SSERetry: 250 * time.Millisecond})

	// A gateway that polls after an hour: a call's answer comes first,
	// whatever the machine's load.
	_, patient := serve(t, sup, gateway.Options{SSEPollAfter: time.Hour})
	openAt := func(url, version string) *rawClient {
		c := &rawClient{t: t, url: url}
		resp, body := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		c.session = resp.Header.Get("Mcp-Session-Id")
		c.header = http.Header{"Mcp-Protocol-Version": {version}}
		resp, _ = c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
		return c
	}
	request := func(c *rawClient, method, body string, hdr map[string]string) *http.Response {
		req, err := http.NewRequestWithContext(testwait.Context(t), method, c.url+gateway.MCPPath, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", c.header.Get("Mcp-Protocol-Version"))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := streamClient.Do(req)
		require.NoError(t, err, "%s %s", method, body)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	// The call outlasts SSEPollAfter by far, so that it is polled on a
	// loaded machine too.
	const sleep = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mcp__t__sleep","arguments":{"ms":1500}}}`

	c := openAt(srv.URL, protocol.Version20251125)
	resp := request(c, http.MethodPost, sleep, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := readEvents(t, resp)
	require.Len(t, events, 1, "the POST stream ends after its priming event: %+v", events)
	prime := events[0]
	assert.NotEmpty(t, prime.id, "the priming event has an id")
	assert.Equal(t, "250", prime.retry, "the priming event carries SSERetry")
	assert.Empty(t, prime.data, "the priming event has no data")

	resp = request(c, http.MethodGet, "", map[string]string{"Last-Event-ID": prime.id})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	events = readEvents(t, resp)
	require.Len(t, events, 1, "the resumed stream carries the answer, then ends: %+v", events)
	m, err := protocol.Decode([]byte(events[0].data))
	require.NoError(t, err, events[0].data)
	assert.Equal(t, "5", m.ID.String())
	assert.Contains(t, string(m.Result), "slept")
	assert.NotEmpty(t, events[0].id, "the answer's event has an id, to resume after")
	resp = request(c, http.MethodGet, "", map[string]string{"Last-Event-ID": prime.id})
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "a stream read to its answer is gone")

	quick := openAt(patient.URL, protocol.Version20251125)
	resp = request(quick, http.MethodPost, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"mcp__t__echo","arguments":{"text":"hi"}}}`, nil)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), "a call that ends before SSEPollAfter is answered on its POST")

	old := openAt(srv.URL, protocol.Version20250618)
	resp = request(old, http.MethodPost, sleep, nil)
	events = readEvents(t, resp)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return // answered as JSON: not polled
	}
	require.NotEmpty(t, events)
	assert.Contains(t, events[len(events)-1].data, "slept", "a 2025-06-18 session cannot resume: its POST carries the answer")
}

// mcpvisor's own client (a supervisor connected to the gateway at
// 2025-11-25) resumes a polled call and gets its answer.
func TestPolledCallThroughAClient(t *testing.T) {
	t.Parallel()
	_, url := testserver.Serve(t, testserver.Options{})
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"t": {Config: transports.Config{URL: url}}})
	_, srv := serve(t, sup, gateway.Options{SSEPollAfter: 50 * time.Millisecond, SSERetry: 10 * time.Millisecond})
	host := downstream(t, srv.URL, protocol.Version20251125)
	ctx, cancel := context.WithTimeout(testwait.Context(t), 30*time.Second)
	defer cancel()
	res, err := host.CallTool(ctx, "mcp__gw__t__sleep", map[string]any{"ms": 400})
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	assert.Equal(t, "slept", res.Content[0].Text)
}
