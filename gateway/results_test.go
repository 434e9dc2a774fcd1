package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// hints returns the caching hints of a result, "" for a missing one.
func hints(t *testing.T, res map[string]json.RawMessage) (ttl, scope string) {
	t.Helper()
	return string(res["ttlMs"]), strings.Trim(string(res["cacheScope"]), `"`)
}

// Every result of the stateless era carries its resultType; the
// cacheable ones carry ttlMs and cacheScope no looser than the strictest
// ready server's: the shortest ttlMs, public only when all are public, a
// handshake-era server (which gives none) counting as 0 and private;
// Options.MaxCacheTTL caps them. A read keeps its server's hints. The
// results of a handshake-era session are as they were.
func TestStatelessResultsCarryResultTypeAndCachingHints(t *testing.T) {
	mock := func(name string, args ...string) mcpvisor.ServerConfig {
		return mcpvisor.ServerConfig{Config: mockserver.Command(append([]string{"-name", name, "-resources", "1", "-prompts", "1"}, args...)...)}
	}
	cacheable := []string{protocol.MethodDiscover, protocol.MethodToolsList, protocol.MethodPromptsList,
		protocol.MethodResourcesList, protocol.MethodResourcesTemplatesList}
	for _, tc := range []struct {
		name       string
		servers    map[string]mcpvisor.ServerConfig
		opts       gateway.Options
		ttl, scope string
	}{
		{"one public server", map[string]mcpvisor.ServerConfig{"a": mock("a", "-cache-ttl", "30s")}, gateway.Options{}, "30000", "public"},
		{"capped", map[string]mcpvisor.ServerConfig{"a": mock("a", "-cache-ttl", "30s")}, gateway.Options{MaxCacheTTL: 20 * time.Second}, "20000", "public"},
		{"the strictest of two", map[string]mcpvisor.ServerConfig{
			"a": mock("a", "-cache-ttl", "30s"),
			"b": mock("b", "-cache-ttl", "10s", "-cache-scope", "private"),
		}, gateway.Options{}, "10000", "private"},
		{"a handshake-era server gives none", map[string]mcpvisor.ServerConfig{
			"a": mock("a", "-cache-ttl", "30s"),
			"c": mock("c", "-versions", protocol.Version20251125),
		}, gateway.Options{}, "0", "private"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, url := statelessGateway(t, tc.servers, tc.opts)
			c := newStatelessClient(t, url, `{}`)
			for _, method := range cacheable {
				res := c.call(method, `{}`).result(t)
				assert.Equal(t, `"complete"`, string(res["resultType"]), method)
				ttl, scope := hints(t, res)
				assert.Equal(t, tc.ttl, ttl, method)
				assert.Equal(t, tc.scope, scope, method)
			}
			res := c.call(protocol.MethodResourcesRead, `{"uri":"mock://resource/1"}`).result(t)
			assert.Equal(t, `"complete"`, string(res["resultType"]))
			ttl, scope := hints(t, res)
			want := map[string]string{"one public server": "30000", "capped": "20000", "the strictest of two": "30000", "a handshake-era server gives none": "30000"}
			assert.Equal(t, want[tc.name], ttl, "a read keeps the hints of the server that answered (a), capped")
			assert.Equal(t, "public", scope)

			call := c.call(protocol.MethodToolsCall, `{"name":"mcp__a__add","arguments":{"a":1,"b":2}}`).result(t)
			assert.Equal(t, `"complete"`, string(call["resultType"]))
			assert.NotContains(t, call, "ttlMs", "a tool result is not cacheable")
			echo := c.call(protocol.MethodToolsCall, `{"name":"mcp__a__echo","arguments":{"text":"x"}}`).result(t)
			assert.Equal(t, `"complete"`, string(echo["resultType"]), "the text-only fast path too")

			rc := &rawClient{t: t, url: url}
			rc.initialize()
			resp, body := rc.post(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.NotContains(t, body, "resultType", "handshake-era results are unchanged")
			assert.NotContains(t, body, "ttlMs")
		})
	}
}

// An unknown resource is -32602 in the stateless era (SEP-2164) and
// -32002 in the handshake eras, as before.
func TestUnknownResourceByEra(t *testing.T) {
	_, url := statelessGateway(t, map[string]mcpvisor.ServerConfig{"fx": fixtures()}, gateway.Options{})
	a := newStatelessClient(t, url, `{}`).call(protocol.MethodResourcesRead, `{"uri":"test://nowhere"}`)
	assert.Equal(t, int64(protocol.CodeInvalidParams), a.code(t))
	assert.JSONEq(t, `{"uri":"test://nowhere"}`, string(a.msg.Error.Data))

	rc := &rawClient{t: t, url: url}
	rc.initialize()
	_, body := rc.post(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"test://nowhere"}}`)
	assert.Contains(t, body, `"code":-32002`)
}

// listenEvents opens a subscriptions/listen stream and returns its
// messages as they come, until ctx ends.
func listenEvents(t *testing.T, ctx context.Context, url, filter string) <-chan protocol.Message {
	t.Helper()
	c := newStatelessClient(t, url, `{}`)
	body := `{"jsonrpc":"2.0","id":"listen-1","method":"subscriptions/listen","params":` + c.params(`{"notifications":`+filter+`}`) + `}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+gateway.MCPPath, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", protocol.Version20260728)
	req.Header.Set("Mcp-Method", protocol.MethodSubscriptionsListen)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := make(chan protocol.Message, 16)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				if m, err := protocol.Decode([]byte(data)); err == nil {
					out <- *m
				}
			}
		}
	}()
	return out
}

// nextMethod waits (at most 10 s) for a message of method on a listen
// stream, skipping others.
func nextMethod(t *testing.T, events <-chan protocol.Message, method string) protocol.Message {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-events:
			require.True(t, ok, "the listen stream ended before %s", method)
			if m.Method == method {
				return m
			}
		case <-timeout:
			require.FailNow(t, "no "+method+" on the listen stream within 10s")
		}
	}
}

// A tool or prompt list that changes behind the gateway reaches an open
// subscriptions/listen stream that asked for it, tagged with its
// subscription id; a stream ended by the gateway gets a result naming
// its subscription.
func TestListenStreamGetsListChanges(t *testing.T) {
	g, url := statelessGateway(t, map[string]mcpvisor.ServerConfig{"fx": fixtures()}, gateway.Options{Names: gateway.NamesBare})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := listenEvents(t, ctx, url, `{"toolsListChanged":true,"promptsListChanged":true}`)
	ack := nextMethod(t, events, protocol.NotificationSubscriptionsAck)
	assert.Contains(t, string(ack.Params), `"io.modelcontextprotocol/subscriptionId":"listen-1"`)

	c := newStatelessClient(t, url, `{}`)
	c.call(protocol.MethodToolsCall, `{"name":"test_trigger_tool_change","arguments":{}}`).result(t)
	m := nextMethod(t, events, protocol.NotificationToolsListChanged)
	assert.Contains(t, string(m.Params), `"io.modelcontextprotocol/subscriptionId":"listen-1"`)
	c.call(protocol.MethodToolsCall, `{"name":"test_trigger_prompt_change","arguments":{}}`).result(t)
	nextMethod(t, events, protocol.NotificationPromptsListChanged)

	drained := make(chan bool, 1)
	go func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		drained <- g.Drain(dctx)
	}()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-events:
			require.True(t, ok, "the stream ended without its result")
			if m.Kind != protocol.KindResponse {
				continue
			}
			assert.JSONEq(t, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"},"resultType":"complete"}`, string(m.Result))
			select {
			case ok := <-drained:
				assert.True(t, ok, "nothing left in flight")
			case <-time.After(10 * time.Second):
				require.FailNow(t, "Drain did not return within 10s")
			}
			return
		case <-timeout:
			require.FailNow(t, "no result ending the listen stream within 10s of Drain")
		}
	}
}
