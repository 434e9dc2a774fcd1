package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/mcpserver"
)

// heapInUse returns the bytes of live heap objects after a full
// collection.
func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// initWithCaps is an initialize whose capabilities carry n bytes of
// experimental data.
func initWithCaps(n int) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
		`"capabilities":{"experimental":{"blob":{"data":"` + strings.Repeat("A", n) + `"}}},"clientInfo":{"name":"big","version":"1"}}}`
}

// rpcErrorOf decodes the JSON-RPC error of an answer; ok is false (and
// the test marked failed) when it is none. It asserts, so that it may run
// on any goroutine.
func rpcErrorOf(t *testing.T, body string) (code int64, message string, data mcpserver.StateLimitData, ok bool) {
	t.Helper()
	var m struct {
		Error *struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if !assert.NoError(t, json.Unmarshal([]byte(body), &m), "%.300s", body) || !assert.NotNil(t, m.Error, "an error answer: %.300s", body) {
		return 0, "", data, false
	}
	if len(m.Error.Data) > 0 && !assert.NoError(t, json.Unmarshal(m.Error.Data, &data)) {
		return 0, "", data, false
	}
	return m.Error.Code, m.Error.Message, data, true
}

// inParallel runs f(i) for i in [0, n) on 4 goroutines and waits
// (bounded: a few minutes, for 400 MB of requests under -race on a busy
// machine).
func inParallel(t *testing.T, n int, f func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				f(i)
			}
		})
	}
	start := time.Now()
	testwait.CallWithin(t, 5*time.Minute, fmt.Sprintf("the %d requests", n), wg.Wait)
	t.Logf("%d requests in %v", n, time.Since(start).Round(time.Millisecond))
}

// 200 initializes with 2 MB capabilities each (50 under -race) are refused with a clear
// JSON-RPC error before any session is made: the gateway keeps nothing of
// them (before the bound it kept every one, 400 MB), and /metrics counts
// the refusals. A client with ordinary capabilities is served beside them.
func TestGatewayRefusesOversizedSessionState(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	const total = 16 << 20
	_, srv := serve(t, sup, gateway.Options{MaxSessionMemory: total})
	big := initWithCaps(2 << 20)
	before := heapInUse()
	floods := 200
	if raceEnabled {
		floods = 50 // still 100 MB, several times the bound
	}
	inParallel(t, floods, func(int) {
		c := &rawClient{t: t, url: srv.URL}
		resp, body := c.post(big)
		if !assert.Equal(t, http.StatusOK, resp.StatusCode) {
			return
		}
		assert.Empty(t, resp.Header.Get("Mcp-Session-Id"), "no session was made")
		code, msg, data, ok := rpcErrorOf(t, body)
		if !ok {
			return
		}
		assert.EqualValues(t, mcpserver.CodeSessionStateTooLarge, code)
		assert.Contains(t, msg, "initialize: this would make the server keep")
		assert.Contains(t, msg, fmt.Sprintf("more than the %d it keeps per session", mcpserver.DefaultMaxSessionState))
		assert.Equal(t, mcpserver.StateLimitData{Bound: "session", Max: mcpserver.DefaultMaxSessionState, Size: data.Size}, data)
		assert.Greater(t, data.Size, int64(2<<20))
	})
	grown := int64(heapInUse()) - int64(before)
	t.Logf("heap grew by %d bytes over %d refused 2 MB initializes", grown, floods)
	assert.Less(t, grown, int64(total+(16<<20)), "the gateway kept what it refused")

	ok := &rawClient{t: t, url: srv.URL}
	ok.initialize()
	resp, _ := ok.post(pingBody)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 1.0, metric(t, srv.URL, "mcpvisor_gateway_sessions"))
	assert.Equal(t, float64(floods), metric(t, srv.URL, `mcpvisor_gateway_session_state_refused_total{bound="session"}`))
	assert.Equal(t, float64(mcpserver.DefaultMaxSessionState), metric(t, srv.URL, `mcpvisor_gateway_session_state_limit_bytes{bound="session"}`))
	assert.Equal(t, float64(total), metric(t, srv.URL, `mcpvisor_gateway_session_state_limit_bytes{bound="total"}`))
	assert.Equal(t, 0.0, metric(t, srv.URL, "mcpvisor_gateway_sessions_evicted_total"), "nobody was evicted for what was refused")
}

// Sessions each within the per-session bound, but more of them than the
// total bound holds: a new one evicts the longest idle, so what the
// gateway keeps stays within the total (before the bound, 300 sessions of
// 60 KB were all kept: 18 MB).
func TestGatewayBoundsTotalSessionMemory(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	const total = 1 << 20
	_, srv := serve(t, sup, gateway.Options{MaxSessionMemory: total})
	init := initWithCaps(60 << 10)
	first := &rawClient{t: t, url: srv.URL}
	resp, body := first.post(init)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	first.session = resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, first.session)

	before := heapInUse()
	const sessions = 300
	var made atomic.Int64
	inParallel(t, sessions, func(int) {
		c := &rawClient{t: t, url: srv.URL}
		resp, body := c.post(init)
		if assert.Equal(t, http.StatusOK, resp.StatusCode) && assert.NotContains(t, body, `"error"`) &&
			assert.NotEmpty(t, resp.Header.Get("Mcp-Session-Id"), "every initialize gets a session") {
			made.Add(1)
		}
	})
	require.EqualValues(t, sessions, made.Load())
	grown := int64(heapInUse()) - int64(before)
	t.Logf("heap grew by %d bytes over %d sessions of 60 KB", grown, sessions)
	assert.Less(t, grown, int64(total+(7<<20)), "the sessions kept pass the total bound")

	held := metric(t, srv.URL, "mcpvisor_gateway_session_state_bytes")
	assert.LessOrEqual(t, held, float64(total))
	assert.Greater(t, held, float64(total/2), "the bound evicts what it must, not everything")
	kept := metric(t, srv.URL, "mcpvisor_gateway_sessions")
	evicted := metric(t, srv.URL, "mcpvisor_gateway_sessions_evicted_memory_total")
	assert.Less(t, kept, float64(total/(60<<10))+1)
	assert.Equal(t, float64(sessions+1), kept+evicted, "every session is kept or counted evicted")
	assert.Equal(t, evicted, metric(t, srv.URL, "mcpvisor_gateway_sessions_evicted_total"))

	resp, body = first.post(pingBody)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the longest idle was evicted: %s", body)
}

// A session's subscriptions count in its bound: one that would pass it
// is refused with the same clear error, and nothing is recorded.
func TestGatewayBoundsSubscriptions(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a", "-resources", "1", "-subscribe")}})
	_, srv := serve(t, sup, gateway.Options{MaxSessionState: 40 << 10})
	c := &rawClient{t: t, url: srv.URL}
	c.initialize()
	subscribe := func(uri string) string {
		resp, body := c.post(`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"` + uri + `"}}`)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		return body
	}
	long := "mock://template/" + strings.Repeat("x", 24<<10)
	assert.NotContains(t, subscribe(long+"1"), `"error"`)
	assert.NotContains(t, subscribe(long+"1"), `"error"`, "subscribing again costs nothing")
	code, msg, data, ok := rpcErrorOf(t, subscribe(long+"2"))
	require.True(t, ok)
	assert.EqualValues(t, mcpserver.CodeSessionStateTooLarge, code)
	assert.Contains(t, msg, "resources/subscribe: this would make the server keep")
	assert.Equal(t, "session", data.Bound)
	assert.Equal(t, 1.0, metric(t, srv.URL, `mcpvisor_gateway_session_state_refused_total{bound="session"}`))

	// Unsubscribing frees its room.
	resp, body := c.post(`{"jsonrpc":"2.0","id":4,"method":"resources/unsubscribe","params":{"uri":"` + long + `1"}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.NotContains(t, subscribe(long+"2"), `"error"`)
}

// A POST whose headers promise a body that never comes is answered 408
// and its connection closed once the body timeout has passed (before,
// it was held for as long as the client liked); the deadline covers the
// body only: a call answered later than it on a stream is not cut.
func TestGatewayBodyTimeout(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	const timeout = 300 * time.Millisecond
	_, srv := serve(t, sup, gateway.Options{BodyTimeout: timeout})

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n", gateway.MCPPath, srv.Listener.Addr())
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second))) // a bound on the test, far beyond the timeout
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err, "a POST whose body never came was not answered")
	b := make([]byte, 512)
	n, _ := resp.Body.Read(b)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	assert.Contains(t, string(b[:n]), "the body did not arrive within "+timeout.String())
	_, err = br.ReadByte()
	var ne net.Error
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "the connection is closed, not held: %v", err)
	assert.Error(t, err, "the connection is closed")
	assert.Equal(t, 1.0, metric(t, srv.URL, "mcpvisor_gateway_body_timeouts_total"))

	// A call that outlasts the body timeout is answered whole.
	c := &rawClient{t: t, url: srv.URL}
	c.initialize()
	resp, body := c.post(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"mcp__a__sleep","arguments":{"ms":1000}}}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, body, `"slept"`)
	assert.Equal(t, 1.0, metric(t, srv.URL, "mcpvisor_gateway_body_timeouts_total"))
}

// A POST whose Content-Length passes the message limit is refused 413 at
// once, before any of its body is read (before, the gateway read 16 MiB
// of it first).
func TestGatewayRefusesOversizedBodyUnread(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	_, srv := serve(t, sup, gateway.Options{BodyTimeout: time.Minute})
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n", gateway.MCPPath, srv.Listener.Addr(), 17<<20)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second))) // a bound on the test, within the body timeout
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "a POST too large to read was not answered before its body came")
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.True(t, resp.Close, "the connection closes")
}

// A stateless-era call that may wait for its client's input is kept
// behind the request (up to the input wait per round): its params count
// in the sessions' byte bound while it runs, and a call that would pass
// the bound is refused with the same clear error (before, any number of
// them were kept).
func TestGatewayBoundsCallsWaitingForInput(t *testing.T) {
	t.Parallel()
	const total = 1 << 20
	_, url := statelessGateway(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}},
		gateway.Options{MaxSessionMemory: total})
	c := newStatelessClient(t, url, `{"elicitation":{}}`)
	pad := strings.Repeat("p", 700<<10)
	first := make(chan string, 1)
	go func() {
		a := c.call("tools/call", `{"name":"mcp__a__sleep","arguments":{"ms":3000,"pad":"`+pad+`"}}`)
		first <- a.raw
	}()
	require.Eventually(t, func() bool { return metric(t, url, "mcpvisor_gateway_input_calls") == 1 }, 20*time.Second, 10*time.Millisecond)
	assert.Greater(t, metric(t, url, "mcpvisor_gateway_session_state_bytes"), float64(700<<10), "the call's params are counted")

	a := c.call("tools/call", `{"name":"mcp__a__sleep","arguments":{"ms":1,"pad":"`+pad+`"}}`)
	assert.EqualValues(t, mcpserver.CodeSessionStateTooLarge, a.code(t), a.raw)
	assert.Contains(t, a.raw, "the server keeps at most 1048576 bytes for all its sessions together")
	assert.Equal(t, 1.0, metric(t, url, `mcpvisor_gateway_session_state_refused_total{bound="total"}`))

	assert.Contains(t, testwait.RecvWithin(t, first, 30*time.Second, "the first call's answer"), `"slept"`)
	require.Eventually(t, func() bool { return metric(t, url, "mcpvisor_gateway_session_state_bytes") == 0 }, 10*time.Second, 10*time.Millisecond,
		"the ended call gave its bytes back")
	a = c.call("tools/call", `{"name":"mcp__a__sleep","arguments":{"ms":1,"pad":"`+pad+`"}}`)
	assert.Contains(t, a.raw, `"slept"`, "there is room again")
}

// Over stdio too: an initialize whose capabilities pass the per-session
// bound is refused with the clear error, and the client may initialize
// again within it.
func TestGatewayStdioRefusesOversizedSessionState(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	g := gateway.New(sup, gateway.Options{})
	t.Cleanup(g.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- g.ServeStdio(ctx, inR, outW); outW.Close() }()
	out := testwait.NewLineReader(t, outR)
	send := func(s string) {
		var err error
		testwait.Call(t, "the gateway to read a request", func() { _, err = io.WriteString(inW, s+"\n") })
		require.NoError(t, err)
	}
	send(initWithCaps(100 << 10))
	code, msg, data, ok := rpcErrorOf(t, out.MustLine("the answer to the large initialize"))
	require.True(t, ok)
	assert.EqualValues(t, mcpserver.CodeSessionStateTooLarge, code)
	assert.Contains(t, msg, "initialize: this would make the server keep")
	assert.Equal(t, "session", data.Bound)

	send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	assert.Contains(t, out.MustLine("the answer to initialize"), `"result"`)
	inW.Close()
	assert.NoError(t, testwait.Recv(t, served, "ServeStdio to return at the end of its input"))
}
