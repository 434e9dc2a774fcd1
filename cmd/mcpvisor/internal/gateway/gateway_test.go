package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/mcpvisor/mcpvisor/cmd/mcpvisor/internal/gateway"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

func TestMain(m *testing.M) {
	mcpvisor.HelperMain()
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
		<-done
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
			assert.Contains(t, names(host.Tools()), "mcp__gw__mcp__a__echo")
			assert.Contains(t, names(host.Tools()), "mcp__gw__mcp__b__add")
			assert.Contains(t, names(host.Tools()), "mcp__gw__wait_for_channel_message")

			ctx := context.Background()
			res, err := host.CallTool(ctx, "mcp__gw__mcp__b__add", map[string]any{"a": 2, "b": 40})
			require.NoError(t, err)
			require.Len(t, res.Content, 1)
			assert.Equal(t, "42", res.Content[0].Text)

			prompts, err := host.ListPrompts("")
			require.NoError(t, err)
			require.NotEmpty(t, prompts)
			pr, err := host.GetPrompt(ctx, prompts[0].Name, nil)
			require.NoError(t, err)
			assert.NotEmpty(t, pr.Messages)
			rs, _, err := host.ListResources("gw")
			require.NoError(t, err)
			require.Len(t, rs, 2)
			rr, err := host.ReadResource(ctx, "gw", rs[0].Resource.URI)
			require.NoError(t, err)
			assert.NotEmpty(t, rr.Contents)

			// A tool added behind the gateway reaches the host.
			_, err = sup.CallTool(ctx, "mcp__a__announce", map[string]any{"text": "late"})
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				return contains(names(host.Tools()), "mcp__gw__mcp__a__late")
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
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
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
	r2, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	r2.Body.Close()
	assert.Equal(t, http.StatusForbidden, r2.StatusCode)

	c.header = http.Header{"Authorization": {"Bearer s3cret"}}
	c.initialize()
	_, body := c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	assert.Contains(t, body, `"mcp__a__echo"`)
	assert.NotContains(t, body, `"mcp__a__fail"`)
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

	open := func(last string) (*http.Response, *bufio.Reader) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+gateway.MCPPath, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.session)
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return resp, bufio.NewReader(resp.Body)
	}
	next := func(br *bufio.Reader) (id, data string) {
		for {
			line, err := br.ReadString('\n')
			require.NoError(t, err)
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "id: "):
				id = line[4:]
			case strings.HasPrefix(line, "data: "):
				data = line[6:]
			case line == "" && data != "":
				return id, data
			}
		}
	}
	resp, br := open("")
	_, err := sup.CallTool(context.Background(), "mcp__a__announce", map[string]any{"text": "one"})
	require.NoError(t, err)
	id, data := next(br)
	assert.Equal(t, "1", id)
	assert.Contains(t, data, protocol.NotificationToolsListChanged)
	resp.Body.Close()

	_, err = sup.CallTool(context.Background(), "mcp__a__announce", map[string]any{"text": "two"})
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // sent while no stream is open
	resp, br = open("1")
	defer resp.Body.Close()
	id, data = next(br)
	assert.Equal(t, "2", id, "the missed notification is replayed")
	assert.Contains(t, data, protocol.NotificationToolsListChanged)

	resp2, _ := c.post(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	assert.Equal(t, http.StatusOK, resp2.StatusCode)
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+gateway.MCPPath, nil)
	req.Header.Set("Mcp-Session-Id", c.session)
	dr, err := http.DefaultClient.Do(req)
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

	lines := make(chan map[string]json.RawMessage, 16)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
		close(lines)
	}()
	send := func(s string) {
		_, err := io.WriteString(inW, s+"\n")
		require.NoError(t, err)
	}
	await := func(pred func(map[string]json.RawMessage) bool) map[string]json.RawMessage {
		timeout := time.After(10 * time.Second)
		for {
			select {
			case m, ok := <-lines:
				require.True(t, ok, "stdout closed")
				if pred(m) {
					return m
				}
			case <-timeout:
				t.Fatal("timed out")
			}
		}
	}
	byID := func(id string) func(map[string]json.RawMessage) bool {
		return func(m map[string]json.RawMessage) bool { return string(m["id"]) == id }
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	assert.Contains(t, string(await(byID("1"))["result"]), `"2025-11-25"`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__a__echo","arguments":{"text":"hi"}}}`)
	assert.Contains(t, string(await(byID("2"))["result"]), `"hi"`)

	// A cancelled call is not answered, and the next one is.
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp__a__sleep","arguments":{"ms":10000}}}`)
	time.Sleep(100 * time.Millisecond)
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`)
	send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	m := await(func(m map[string]json.RawMessage) bool { return string(m["id"]) == "3" || string(m["id"]) == "4" })
	assert.Equal(t, "4", string(m["id"]))

	_, err := sup.CallTool(context.Background(), "mcp__a__announce", map[string]any{"text": "late"})
	require.NoError(t, err)
	await(func(m map[string]json.RawMessage) bool {
		return string(m["method"]) == `"`+protocol.NotificationToolsListChanged+`"`
	})
	inW.Close()
	select {
	case err := <-served:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not return at EOF")
	}
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
	time.Sleep(200 * time.Millisecond)
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
	wg.Wait()
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
	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	drained := make(chan bool, 1)
	go func() { drained <- g.Drain(dctx) }()
	time.Sleep(50 * time.Millisecond)
	_, body := c.post(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`)
	assert.Contains(t, body, `"code":-32052`, "a new request during the drain is refused")
	assert.True(t, <-drained)
	assert.Contains(t, <-done, `"result"`, "the call in flight finished")

	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	assert.True(t, g.Drain(short), "nothing left in flight")
}

// The admin API: /status, /metrics, /events with resumption.
func TestGatewayAdmin(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	_, srv := serve(t, sup, gateway.Options{})
	_, err := sup.CallTool(context.Background(), "mcp__a__echo", map[string]any{"text": "x"})
	require.NoError(t, err)

	resp, err := http.Get(srv.URL + "/status")
	require.NoError(t, err)
	var rep gateway.StatusReport
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
	resp.Body.Close()
	require.Len(t, rep.Servers, 1)
	assert.Equal(t, mcpvisor.StateReady, rep.Servers[0].State)
	assert.Equal(t, uint64(1), rep.Servers[0].Latency.Calls)
	assert.Greater(t, rep.Servers[0].LatencyP50Ms, 0.0)

	resp, err = http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(b), `mcpvisor_server_state{server="a",state="ready"} 1`)
	assert.Contains(t, string(b), `mcpvisor_server_request_duration_seconds_count{server="a"} 1`)
	assert.Contains(t, string(b), `mcpvisor_server_request_duration_seconds_bucket{server="a",le="+Inf"} 1`)

	readEvents := func(last string, n int) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
		req.Header.Set("Last-Event-ID", last)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		var ids []string
		for len(ids) < n {
			line, err := br.ReadString('\n')
			if errors.Is(err, context.DeadlineExceeded) || err != nil {
				break
			}
			if id, ok := strings.CutPrefix(strings.TrimSpace(line), "id: "); ok {
				ids = append(ids, id)
			}
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
	_, srv := serve(t, sup, gateway.Options{BareNames: true})
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
