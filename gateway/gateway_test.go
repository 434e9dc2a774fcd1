package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/testserver"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

func TestMain(m *testing.M) {
	mcpvisor.HelperMain()
	testserver.Main()
	if mockserver.IsRequested() {
		os.Exit(mockserver.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// upstream starts a supervisor over the given mock servers and waits for
// them.
func upstream(t *testing.T, servers map[string]mcpvisor.ServerConfig) *mcpvisor.Supervisor {
	return benchSupervisor(t, servers)
}

func httpConfig(url string) transports.Config {
	return transports.Config{Type: "http", URL: url + gateway.MCPPath}
}

func benchSupervisor(t testing.TB, servers map[string]mcpvisor.ServerConfig) *mcpvisor.Supervisor {
	t.Helper()
	ctx := context.Background()
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(cctx))
	})
	_, err = sup.SetServers(ctx, servers, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	return sup
}

// serve runs a gateway over sup behind an httptest server.
func serve(t testing.TB, sup gateway.Backend, opts gateway.Options) (*gateway.Gateway, *httptest.Server) {
	t.Helper()
	g := gateway.New(sup, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(ctx, 5*time.Millisecond)
	}()
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() {
		g.Close()
		srv.Close()
		cancel()
		testwait.Done(t, done, "the gateway's Run to return")
	})
	return g, srv
}

// downstream connects a second supervisor to the gateway, as a host would.
func downstream(t *testing.T, url, version string) *mcpvisor.Supervisor {
	t.Helper()
	return upstream(t, map[string]mcpvisor.ServerConfig{
		"gw": {Config: transports.Config{Type: "http", URL: url + gateway.MCPPath}, ProtocolVersion: version},
	})
}

func names(tools []mcpvisor.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

// A supervisor connects to the gateway in every era, lists the tools of
// the servers behind it, calls one, and sees a tool added behind the
// gateway as a list change.
func TestGatewayEras(t *testing.T) {
	for _, version := range []string{"", protocol.Version20251125, protocol.Version20250618, protocol.Version20250326} {
		name := version
		if name == "" {
			name = "negotiated"
		}
		t.Run(name, func(t *testing.T) {
			sup := upstream(t, map[string]mcpvisor.ServerConfig{
				"a": {Config: mockserver.Command("-name", "a", "-prompts", "1", "-resources", "2")},
				"b": {Config: mockserver.Command("-name", "b", "-versions", "2025-06-18")},
			})
			_, srv := serve(t, sup, gateway.Options{})
			host := downstream(t, srv.URL, version)
			st := host.Status()
			require.Len(t, st, 1)
			require.Equal(t, mcpvisor.StateReady, st[0].State, st[0].LastError)
			if version == "" {
				assert.Equal(t, protocol.Version20260728, st[0].ProtocolVersion)
			} else {
				assert.Equal(t, version, st[0].ProtocolVersion)
			}
			// The host qualifies the gateway's qualified names once more.
			assert.Contains(t, names(host.Tools()), "mcp__gw__a__echo")
			assert.Contains(t, names(host.Tools()), "mcp__gw__b__add")
			assert.Contains(t, names(host.Tools()), "mcp__gw__wait_for_channel_message")

			ctx := testwait.Context(t)
			res, err := host.CallTool(ctx, "mcp__gw__b__add", map[string]any{"a": 2, "b": 40})
			require.NoError(t, err)
			require.Len(t, res.Content, 1)
			assert.Equal(t, "42", res.Content[0].Text)

			prompts, err := host.Prompts().List("")
			require.NoError(t, err)
			require.NotEmpty(t, prompts)
			pr, err := host.Prompts().Get(ctx, prompts[0].Name, nil)
			require.NoError(t, err)
			assert.NotEmpty(t, pr.Messages)
			rs, _, err := host.Resources().List("gw")
			require.NoError(t, err)
			require.Len(t, rs, 2)
			rr, err := host.Resources().Read(ctx, "gw", rs[0].Resource.URI)
			require.NoError(t, err)
			assert.NotEmpty(t, rr.Contents)

			// A tool added behind the gateway reaches the host.
			_, err = sup.CallTool(ctx, "mcp__a__announce", map[string]any{"text": "late"})
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				return contains(names(host.Tools()), "mcp__gw__a__late")
			}, 10*time.Second, 10*time.Millisecond)
		})
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// client is the tests' HTTP client: every request it makes, body
// included, ends within testwait.Patience. (Streams are read with a
// request context instead.)
var client = &http.Client{Timeout: testwait.Patience}

// streamClient opens event streams: their headers must come within
// testwait.Patience; the body is read with testwait's deadlines.
var streamClient = &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: testwait.Patience}}

// rawClient speaks Streamable HTTP by hand.
type rawClient struct {
	t       *testing.T
	url     string
	session string
	header  http.Header
}

func (c *rawClient) post(body string) (*http.Response, string) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url+gateway.MCPPath, strings.NewReader(body))
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	require.NoError(c.t, err, "POST %s", body)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err, "reading the answer to %s", body)
	return resp, string(b)
}

func (c *rawClient) initialize() {
	resp, body := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	require.Equal(c.t, http.StatusOK, resp.StatusCode, body)
	c.session = resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(c.t, c.session)
	resp, _ = c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Equal(c.t, http.StatusAccepted, resp.StatusCode)
}

func TestGatewaySecurity(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	_, srv := serve(t, sup, gateway.Options{Token: "s3cret", LocalOnly: true, AllowedOrigins: []string{"https://app.example"},
		Deny: []string{"mcp__a__fail", "mcp__a__sleep"}})
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

	c := &rawClient{t: t, url: srv.URL}
	resp, _ := c.post(init)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no token")
	assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
	c.header = http.Header{"Authorization": {"Bearer wrong"}}
	resp, _ = c.post(init)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "wrong token")

	c.header = http.Header{"Authorization": {"Bearer s3cret"}, "Origin": {"http://evil.example.com"}}
	resp, _ = c.post(init)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "foreign origin")
	c.header = http.Header{"Authorization": {"Bearer s3cret"}, "Origin": {"https://app.example"}}
	resp, _ = c.post(init)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "allowed origin")

	// DNS rebinding: a foreign Host on a loopback listener.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/status", nil)
	req.Host = "evil.example.com"
	req.Header.Set("Authorization", "Bearer s3cret")
	r2, err := client.Do(req)
	require.NoError(t, err)
	r2.Body.Close()
	assert.Equal(t, http.StatusForbidden, r2.StatusCode)

	c.header = http.Header{"Authorization": {"Bearer s3cret"}}
	c.initialize()
	_, body := c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	assert.Contains(t, body, `"a__echo"`)
	assert.NotContains(t, body, `"a__fail"`)
	_, body = c.post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp__a__fail","arguments":{}}}`)
	assert.Contains(t, body, `"code":-32602`, "a denied tool is not callable")

	// Sessions are independent: an unknown id is 404.
	other := &rawClient{t: t, url: srv.URL, session: "nope", header: c.header}
	resp, _ = other.post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	// Without a session, a handshake-era request is refused.
	other.session = ""
	resp, _ = other.post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// The GET stream carries list_changed, numbered, and resumes with
// Last-Event-ID.
func TestGatewayGetStream(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	_, srv := serve(t, sup, gateway.Options{})
	c := &rawClient{t: t, url: srv.URL}
	c.initialize()

	stream := openGetStream(t, srv.URL, c.session, "")
	_, err := sup.CallTool(testwait.Context(t), "mcp__a__announce", map[string]any{"text": "one"})
	require.NoError(t, err)
	ev := stream.Event("tools/list_changed on the GET stream")
	assert.Equal(t, "1", ev.ID)
	assert.Contains(t, ev.Data, protocol.NotificationToolsListChanged)
	stream.Close()

	_, err = sup.CallTool(testwait.Context(t), "mcp__a__announce", map[string]any{"text": "two"})
	require.NoError(t, err)
	// Sent while no stream is open: into the session's outbox.
	require.Eventually(t, func() bool {
		return strings.Contains(metricsText(t, srv.URL), `mcpvisor_gateway_notifications_total{method="notifications/tools/list_changed"} 2`)
	}, testwait.Patience, 5*time.Millisecond, "the second list_changed sent to the session")
	stream = openGetStream(t, srv.URL, c.session, "1")
	ev = stream.Event("the list_changed sent while no stream was open, replayed")
	assert.Equal(t, "2", ev.ID, "the missed notification is replayed")
	assert.Contains(t, ev.Data, protocol.NotificationToolsListChanged)

	resp2, _ := c.post(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	assert.Equal(t, http.StatusOK, resp2.StatusCode)
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+gateway.MCPPath, nil)
	req.Header.Set("Mcp-Session-Id", c.session)
	dr, err := client.Do(req)
	require.NoError(t, err)
	dr.Body.Close()
	assert.Equal(t, http.StatusOK, dr.StatusCode)
	resp2, _ = c.post(`{"jsonrpc":"2.0","id":10,"method":"tools/list"}`)
	assert.Equal(t, http.StatusNotFound, resp2.StatusCode)
}

// Over stdio: initialize, list, call, cancel, and list_changed.
func TestGatewayStdio(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	g := gateway.New(sup, gateway.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.Run(ctx, 5*time.Millisecond)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- g.ServeStdio(ctx, inR, outW); outW.Close() }()

	out := testwait.NewLineReader(t, outR)
	send := func(s string) {
		var err error
		testwait.Call(t, "the gateway to read "+s, func() { _, err = io.WriteString(inW, s+"\n") })
		require.NoError(t, err)
	}
	await := func(what string, pred func(map[string]json.RawMessage) bool) map[string]json.RawMessage {
		for {
			line := out.MustLine(what)
			var m map[string]json.RawMessage
			if json.Unmarshal([]byte(line), &m) == nil && pred(m) {
				return m
			}
		}
	}
	byID := func(id string) func(map[string]json.RawMessage) bool {
		return func(m map[string]json.RawMessage) bool { return string(m["id"]) == id }
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	assert.Contains(t, string(await("the answer to initialize", byID("1"))["result"]), `"2025-11-25"`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__a__echo","arguments":{"text":"hi"}}}`)
	assert.Contains(t, string(await("the answer to echo", byID("2"))["result"]), `"hi"`)

	// A cancelled call is not answered, and the next one is.
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp__a__sleep","arguments":{"ms":10000}}}`)
	require.Eventually(t, func() bool { return g.InFlight() == 1 }, testwait.Patience, time.Millisecond, "the sleep call in flight")
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`)
	send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	m := await("the answer to ping", func(m map[string]json.RawMessage) bool { return string(m["id"]) == "3" || string(m["id"]) == "4" })
	assert.Equal(t, "4", string(m["id"]))

	_, err := sup.CallTool(testwait.Context(t), "mcp__a__announce", map[string]any{"text": "late"})
	require.NoError(t, err)
	await("tools/list_changed", func(m map[string]json.RawMessage) bool {
		return string(m["method"]) == `"`+protocol.NotificationToolsListChanged+`"`
	})
	inW.Close()
	assert.NoError(t, testwait.Recv(t, served, "ServeStdio to return at the end of its input"))
}

// Killing the server behind the gateway during a stream of calls: only
// the calls in flight fail, with a typed error (connection lost); the
// later ones succeed after the reconnect.
func TestGatewayServerKilled(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{
		"a": {Config: mockserver.Command("-name", "a", "-latency", "20ms"),
			Reconnect: mcpvisor.ReconnectPolicy{InitialDelay: mcpvisor.Duration(10 * time.Millisecond)}},
	})
	_, srv := serve(t, sup, gateway.Options{})
	c := &rawClient{t: t, url: srv.URL}
	c.initialize()

	var mu sync.Mutex
	var lost, other []string
	ok := 0
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, body := c.post(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mcp__a__echo","arguments":{"text":"x"}}}`)
				mu.Lock()
				switch {
				case strings.Contains(body, `"result"`):
					ok++
				case strings.Contains(body, `"code":-32051`):
					lost = append(lost, body)
				default:
					other = append(other, body)
				}
				mu.Unlock()
			}
		}()
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return ok >= 10
	}, testwait.Patience, time.Millisecond, "calls flowing before the kill")
	pid := serverPID(t, sup, "a")
	require.NoError(t, killProcess(pid))
	// After the kill, wait for the reconnect and for calls to succeed again.
	require.Eventually(t, func() bool {
		st := sup.Status()
		return st[0].State == mcpvisor.StateReady && serverPIDOrZero(sup, "a") != pid
	}, 20*time.Second, 10*time.Millisecond)
	mu.Lock()
	okAtReconnect := ok
	mu.Unlock()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return ok > okAtReconnect+20
	}, 20*time.Second, 10*time.Millisecond)
	close(stop)
	testwait.Call(t, "the call workers to stop", wg.Wait)
	t.Logf("calls: %d answered, %d lost (in flight at the kill), %d other", ok, len(lost), len(other))
	assert.NotEmpty(t, lost, "the calls in flight at the kill fail as connection lost")
	assert.LessOrEqual(t, len(lost), 4, "only the calls in flight (4 workers) fail")
	// Calls made while the server restarts wait for it (no fail-fast), so
	// no other error is expected.
	assert.Empty(t, other)
	for _, b := range lost {
		assert.Contains(t, b, `"retryable":true`)
	}
}

// Drain refuses new requests and waits for those in flight.
func TestGatewayDrain(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	g, srv := serve(t, sup, gateway.Options{})
	c := &rawClient{t: t, url: srv.URL}
	c.initialize()
	done := make(chan string, 1)
	go func() {
		_, body := c.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mcp__a__sleep","arguments":{"ms":300}}}`)
		done <- body
	}()
	require.Eventually(t, func() bool { return g.InFlight() == 1 }, 5*time.Second, time.Millisecond)
	dctx, cancel := context.WithTimeout(context.Background(), testwait.Patience)
	defer cancel()
	drained := make(chan bool, 1)
	go func() { drained <- g.Drain(dctx) }()
	// Until the drain has begun, requests are served; from then on a new
	// one is refused.
	for deadline := time.Now().Add(testwait.Patience); ; {
		_, body := c.post(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`)
		if strings.Contains(body, `"code":-32052`) {
			break
		}
		require.Contains(t, body, `"result"`, "a request before the drain began")
		require.True(t, time.Now().Before(deadline), "waited %v for the drain to refuse a new request", testwait.Patience)
		time.Sleep(time.Millisecond)
	}
	assert.True(t, testwait.Recv(t, drained, "Drain to return"))
	assert.Contains(t, testwait.Recv(t, done, "the answer to the call in flight"), `"result"`, "the call in flight finished")

	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	assert.True(t, g.Drain(short), "nothing left in flight")
}

// The admin API: /status, /metrics, /events with resumption.
func TestGatewayAdmin(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	_, srv := serve(t, sup, gateway.Options{})
	_, err := sup.CallTool(testwait.Context(t), "mcp__a__echo", map[string]any{"text": "x"})
	require.NoError(t, err)

	resp, err := client.Get(srv.URL + "/status")
	require.NoError(t, err)
	var rep gateway.StatusReport
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
	resp.Body.Close()
	require.Len(t, rep.Servers, 1)
	assert.Equal(t, mcpvisor.StateReady, rep.Servers[0].State)
	assert.Equal(t, uint64(1), rep.Servers[0].Latency.Calls)
	assert.Greater(t, rep.Servers[0].LatencyP50Ms, 0.0)

	b := metricsText(t, srv.URL)
	assert.Contains(t, b, `mcpvisor_server_state{server="a",state="ready"} 1`)
	assert.Contains(t, b, `mcpvisor_server_request_duration_seconds_count{server="a"} 1`)
	assert.Contains(t, b, `mcpvisor_server_request_duration_seconds_bucket{server="a",le="+Inf"} 1`)

	readEvents := func(last string, n int) []string {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
		req.Header.Set("Last-Event-ID", last)
		resp, err := streamClient.Do(req)
		require.NoError(t, err, "opening /events")
		events := testwait.NewLineReader(t, resp.Body)
		defer events.Close()
		var ids []string
		for len(ids) < n {
			ids = append(ids, events.Event(fmt.Sprintf("event %d of /events after %s", len(ids)+1, last)).ID)
		}
		return ids
	}
	assert.Equal(t, []string{"1", "2"}, readEvents("0", 2))
	assert.Equal(t, []string{"3"}, readEvents("2", 1))
}

// BareNames offers a name unique in the pool as the server has it, and a
// shared one qualified; calls by either name reach the right server.
func TestGatewayBareNames(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{
		"a": {Config: mockserver.Command("-name", "a", "-conformance")},
		"b": {Config: mockserver.Command("-name", "b")},
	})
	_, srv := serve(t, sup, gateway.Options{Names: gateway.NamesBare})
	c := &rawClient{t: t, url: srv.URL}
	c.initialize()
	_, body := c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	assert.Contains(t, body, `"name":"test_simple_text"`)
	assert.Contains(t, body, `"name":"mcp__a__echo"`)
	assert.Contains(t, body, `"name":"mcp__b__echo"`)
	assert.NotContains(t, body, `"name":"echo"`)
	_, body = c.post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`)
	assert.Contains(t, body, "simple text response")
	_, body = c.post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"mcp__b__echo","arguments":{"text":"via b"}}}`)
	assert.Contains(t, body, "via b")
	_, body = c.post(`{"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{"name":"test_simple_prompt"}}`)
	assert.Contains(t, body, "simple prompt")
	_, body = c.post(`{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"test://template/7/data"}}`)
	assert.Contains(t, body, `Data for ID: 7`)
}
