package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/channels"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// channelClient is one downstream HTTP session that calls tools by hand,
// every request bounded in time.
type channelClient struct {
	t       *testing.T
	url     string
	session string
	http    *http.Client
	id      int
}

func newChannelClient(t *testing.T, url string) *channelClient {
	c := &channelClient{t: t, url: url, http: &http.Client{Timeout: 30 * time.Second}}
	res := c.rpc(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"waiter","version":"1"}}}`)
	require.Nil(t, res.Error)
	c.rpc(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *protocol.Error `json:"error"`
}

// rpc posts one message and returns its answer (JSON or an event
// stream's last message).
func (c *channelClient) rpc(body string) rpcAnswer {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url+gateway.MCPPath, strings.NewReader(body))
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		c.session = id
	}
	if resp.StatusCode == http.StatusAccepted {
		return rpcAnswer{}
	}
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	var data []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data = []byte(d)
			}
		}
	} else {
		data, err = io.ReadAll(resp.Body)
		require.NoError(c.t, err)
	}
	var a rpcAnswer
	require.NoError(c.t, json.Unmarshal(data, &a), "answer: %s", data)
	return a
}

// call calls a tool and returns its result.
func (c *channelClient) call(name string, args any) (protocol.CallToolResult, *protocol.Error) {
	c.t.Helper()
	c.id++
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}})
	require.NoError(c.t, err)
	a := c.rpc(string(b))
	var res protocol.CallToolResult
	if a.Error == nil {
		require.NoError(c.t, json.Unmarshal(a.Result, &res))
	}
	return res, a.Error
}

// waitResult is wait_for_channel_message's structured result.
type waitResult struct {
	Status        string             `json:"status"`
	Message       *channels.Message  `json:"message"`
	Messages      []channels.Message `json:"messages"`
	WaitedSeconds float64            `json:"waited_seconds"`
	Dropped       uint64             `json:"dropped"`
	Queued        int                `json:"queued"`
}

func (c *channelClient) wait(args map[string]any) waitResult {
	c.t.Helper()
	res, perr := c.call("wait_for_channel_message", args)
	require.Nil(c.t, perr)
	var w waitResult
	require.NoError(c.t, json.Unmarshal(res.StructuredContent, &w), "structured: %s", res.StructuredContent)
	require.Len(c.t, res.Content, 1)
	return w
}

func contents(ms []channels.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Content
	}
	return out
}

func numbered(prefix string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, prefix+strconv.Itoa(i))
	}
	return out
}

func channelStatus(t *testing.T, url string) *gateway.ChannelReport {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url + "/status")
	require.NoError(t, err)
	defer resp.Body.Close()
	var rep gateway.StatusReport
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
	require.NotNil(t, rep.Channels, "/status reports the channel queue")
	return rep.Channels
}

// wait_for_channel_message drains a queue: the messages a server pushed
// before any client connected, or while none waited, are returned at
// once, oldest first (up to max_messages per call); beyond the bound
// (1,000 per server by default) the oldest are dropped, and every loss is
// counted on the next delivery, in /status and in /metrics. Below the
// bound nothing is lost, even when the server pushes faster than the
// client takes.
func TestWaitForChannelMessageQueues(t *testing.T) {
	ctx := context.Background()
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(cctx))
	})
	// The gateway first, as supervise does: its queue exists before any
	// server connects.
	_, srv := serve(t, sup, gateway.Options{})
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"ch": {Config: mockserver.Command("-name", "ch", "-channel", "-channel-at-start", "300")},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return channelStatus(t, srv.URL).Queued == 300 }, 10*time.Second, 10*time.Millisecond,
		"the 300 messages pushed at start are queued before any client connects")

	c := newChannelClient(t, srv.URL)
	got := c.wait(map[string]any{"max_messages": 1000, "timeout_seconds": 5})
	assert.Equal(t, "message_received", got.Status)
	assert.Equal(t, numbered("start", 1, 300), contents(got.Messages), "all of them, oldest first, in one call")
	require.NotNil(t, got.Message)
	assert.Equal(t, "start1", got.Message.Content)
	assert.Equal(t, "ch", got.Message.Server)
	assert.Equal(t, map[string]string{"i": "1"}, got.Message.Meta)
	assert.Zero(t, got.Dropped)
	assert.Zero(t, got.Queued)
	assert.Less(t, got.WaitedSeconds, 5.0, "queued messages come at once")

	// While nobody waits, the server pushes 1,500: the oldest 500 go.
	_, perr := c.call("mcp__ch__channel_burst", map[string]any{"n": 1500, "prefix": "b"})
	require.Nil(t, perr)
	require.Eventually(t, func() bool { return channelStatus(t, srv.URL).Received == 1800 }, 10*time.Second, 10*time.Millisecond)
	st := channelStatus(t, srv.URL)
	assert.Equal(t, 1000, st.Capacity)
	assert.Equal(t, uint64(500), st.Dropped)
	assert.Equal(t, 1000, st.Queued)
	require.Len(t, st.Servers, 1)
	assert.Equal(t, uint64(500), st.Servers[0].Dropped)
	assert.Equal(t, 500.0, metric(t, srv.URL, `mcpvisor_gateway_channel_messages_total{server="ch",outcome="dropped"}`))
	assert.Equal(t, 1000.0, metric(t, srv.URL, `mcpvisor_gateway_channel_queued{server="ch"}`))

	first := c.wait(map[string]any{"timeout_seconds": 5})
	require.Len(t, first.Messages, 1, "one message by default")
	assert.Equal(t, "b501", first.Message.Content)
	assert.Equal(t, uint64(500), first.Message.Dropped, "the loss is reported on the next delivery")
	assert.Equal(t, uint64(500), first.Dropped)
	assert.Equal(t, 999, first.Queued)
	rest := c.wait(map[string]any{"max_messages": 5000, "timeout_seconds": 5})
	assert.Equal(t, numbered("b", 502, 1500), contents(rest.Messages))
	assert.Zero(t, rest.Dropped, "a loss is reported once")
	assert.Equal(t, 1300.0, metric(t, srv.URL, `mcpvisor_gateway_channel_messages_total{server="ch",outcome="delivered"}`))

	// The server pushes faster than the client takes, below the bound:
	// nothing is lost.
	pushed := make(chan *protocol.Error, 1)
	go func() {
		p := newChannelClient(t, srv.URL)
		_, perr := p.call("mcp__ch__channel_burst", map[string]any{"n": 900, "prefix": "f"})
		pushed <- perr
	}()
	var taken []string
	for len(taken) < 900 {
		w := c.wait(map[string]any{"timeout_seconds": 10, "max_messages": 7})
		require.Equal(t, "message_received", w.Status, "after %d messages", len(taken))
		assert.Zero(t, w.Dropped)
		taken = append(taken, contents(w.Messages)...)
	}
	assert.Equal(t, numbered("f", 1, 900), taken)
	select {
	case perr := <-pushed:
		require.Nil(t, perr)
	case <-time.After(30 * time.Second):
		t.Fatal("channel_burst of 900 did not return")
	}
	assert.Equal(t, uint64(500), channelStatus(t, srv.URL).Dropped, "no loss below the bound")
}

// One wait_for_channel_message waits at a time per session: a second
// concurrent call of the same session gets a clear error, another
// session may wait meanwhile. A wait that sees nothing ends with status
// timeout after the time asked for.
func TestWaitForChannelMessageOneWaiterPerSession(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"ch": {Config: mockserver.Command("-name", "ch", "-channel")}})
	g, srv := serve(t, sup, gateway.Options{})
	c := newChannelClient(t, srv.URL)

	first := make(chan waitResult, 1)
	go func() { first <- c.wait(map[string]any{"timeout_seconds": 30, "server": "ch"}) }()
	require.Eventually(t, func() bool { return g.InFlight() == 1 }, 10*time.Second, time.Millisecond, "the first wait is waiting")

	_, perr := c.call("wait_for_channel_message", map[string]any{"timeout_seconds": 1})
	require.NotNil(t, perr, "a second wait of the same session is refused")
	assert.Equal(t, int64(gateway.CodeWaitInProgress), perr.Code)
	assert.Contains(t, perr.Message, "already waiting")

	other := newChannelClient(t, srv.URL)
	start := time.Now()
	w := other.wait(map[string]any{"timeout_seconds": 0.3})
	assert.Equal(t, "timeout", w.Status, "another session may wait; nothing came")
	assert.Nil(t, w.Message)
	assert.Empty(t, w.Messages)
	assert.GreaterOrEqual(t, w.WaitedSeconds, 0.3)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

	// The first wait gets the next message.
	_, perr = other.call("mcp__ch__channel_burst", map[string]any{"n": 1, "prefix": "hello"})
	require.Nil(t, perr)
	select {
	case w := <-first:
		assert.Equal(t, "message_received", w.Status)
		require.NotNil(t, w.Message)
		assert.Equal(t, "hello1", w.Message.Content)
	case <-time.After(20 * time.Second):
		t.Fatal("the first wait did not get the message")
	}
	// Its session may wait again.
	w = c.wait(map[string]any{"timeout_seconds": 0.05})
	assert.Equal(t, "timeout", w.Status)

	_, perr = c.call("wait_for_channel_message", map[string]any{"max_messages": 0})
	require.NotNil(t, perr)
	assert.Equal(t, int64(protocol.CodeInvalidParams), perr.Code)
	_, perr = c.call("wait_for_channel_message", map[string]any{"timeout_seconds": -1})
	require.NotNil(t, perr)
	assert.Equal(t, int64(protocol.CodeInvalidParams), perr.Code)
}
