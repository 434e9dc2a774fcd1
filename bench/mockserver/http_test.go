package mockserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// serve starts an in-process mock server for the test.
func serve(t *testing.T, o Options) *Server {
	t.Helper()
	srv, err := Serve(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func initParams(version string) protocol.InitializeParams {
	return protocol.InitializeParams{ProtocolVersion: version, ClientInfo: protocol.Implementation{Name: "test", Version: "1"}}
}

func echoParams(text string) map[string]any {
	return map[string]any{"name": "echo", "arguments": map[string]any{"text": text}}
}

// result decodes a successful response's result into v.
func result(t *testing.T, m *protocol.Message, v any) {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("error response: %v", m.Error)
	}
	if err := json.Unmarshal(m.Result, v); err != nil {
		t.Fatalf("result %s: %v", m.Result, err)
	}
}

func toolNames(t *testing.T, m *protocol.Message) []string {
	t.Helper()
	var res protocol.ListToolsResult
	result(t, m, &res)
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

func callText(t *testing.T, m *protocol.Message) string {
	t.Helper()
	var res protocol.CallToolResult
	result(t, m, &res)
	if len(res.Content) != 1 {
		t.Fatalf("content %+v", res.Content)
	}
	return res.Content[0].Text
}

// TestTransports runs one session over every HTTP-based mode: initialize,
// tools/list, tools/call, and a list_changed after announce.
func TestTransports(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    Options
		version string
		dial    func(*testing.T, string) rpcClient
	}{
		{"http-json", Options{Transport: TransportHTTP}, protocol.Version20251125, dialHTTP},
		{"http-sse", Options{Transport: TransportHTTP, SSEResponses: true}, protocol.Version20251125, dialHTTP},
		{"http-2025-03-26", Options{Transport: TransportHTTP}, protocol.Version20250326, dialHTTP},
		{"sse", Options{Transport: TransportSSE}, protocol.Version20241105, dialLegacy},
		{"ws", Options{Transport: TransportWS}, protocol.Version20251125, dialWS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, tc.opts)
			c := tc.dial(t, srv.URL)
			var init protocol.InitializeResult
			result(t, c.request(t, protocol.MethodInitialize, initParams(tc.version)), &init)
			if init.ProtocolVersion != tc.version || init.ServerInfo.Name != "mockserver" {
				t.Fatalf("initialize result %+v", init)
			}
			c.notify(t, protocol.NotificationInitialized, nil)
			if names := toolNames(t, c.request(t, protocol.MethodToolsList, nil)); !slices.Contains(names, "echo") {
				t.Fatalf("tools %v lack echo", names)
			}
			if got := callText(t, c.request(t, protocol.MethodToolsCall, echoParams("hi"))); got != "hi" {
				t.Fatalf("echo answered %q", got)
			}
			announce := map[string]any{"name": "announce", "arguments": map[string]any{"text": "late"}}
			if got := callText(t, c.request(t, protocol.MethodToolsCall, announce)); got != "announced late" {
				t.Fatalf("announce answered %q", got)
			}
			waitNote(t, c, protocol.NotificationToolsListChanged)
			if names := toolNames(t, c.request(t, protocol.MethodToolsList, nil)); !slices.Contains(names, "late") {
				t.Fatalf("tools %v lack the announced one", names)
			}
		})
	}
}

// TestSessionEnforced checks the session id's life on Streamable HTTP.
func TestSessionEnforced(t *testing.T) {
	srv := serve(t, Options{Transport: TransportHTTP})
	c := dialHTTP(t, srv.URL).(*httpClient)
	c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
	if len(c.sid) < 16 {
		t.Fatalf("session id %q", c.sid)
	}
	c.notify(t, protocol.NotificationInitialized, nil)

	list := encode(t, 9, protocol.MethodToolsList, nil)
	sid := c.sid
	for _, tc := range []struct {
		name   string
		method string
		sid    string
		hdr    map[string]string
		status int
	}{
		{"missing", http.MethodPost, "", nil, http.StatusBadRequest},
		{"unknown", http.MethodPost, "nope", nil, http.StatusNotFound},
		{"bad version", http.MethodPost, sid, map[string]string{headerProtocolVersion: "1999-01-01"}, http.StatusBadRequest},
		{"good", http.MethodPost, sid, nil, http.StatusOK},
		{"GET missing", http.MethodGet, "", nil, http.StatusBadRequest},
		{"DELETE unknown", http.MethodDelete, "nope", nil, http.StatusNotFound},
		{"DELETE", http.MethodDelete, sid, nil, http.StatusOK},
		{"after DELETE", http.MethodPost, sid, nil, http.StatusNotFound},
	} {
		c.sid = tc.sid
		if resp := c.do(t, tc.method, list, tc.hdr); resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
	}

	// A second initialize opens a new session with another id.
	c.sid = ""
	c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
	if c.sid == "" || c.sid == sid {
		t.Fatalf("new session id %q (old %q)", c.sid, sid)
	}
}

func TestBeforeInitialized(t *testing.T) {
	srv := serve(t, Options{Transport: TransportHTTP})
	c := dialHTTP(t, srv.URL)
	c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
	if m := c.request(t, protocol.MethodToolsList, nil); m.Error == nil || m.Error.Code != protocol.CodeInvalidRequest {
		t.Fatalf("tools/list before initialized: %+v", m)
	}
}

func TestNoGetStream(t *testing.T) {
	srv := serve(t, Options{Transport: TransportHTTP, NoGetStream: true})
	c := dialHTTP(t, srv.URL).(*httpClient)
	c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
	if resp := c.do(t, http.MethodGet, nil, nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: status %d, want 405", resp.StatusCode)
	}
}

func TestExpireSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"http", Options{Transport: TransportHTTP, ExpireSessionAfter: 2}},
		{"http-sse", Options{Transport: TransportHTTP, ExpireSessionAfter: 2, SSEResponses: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, tc.opts)
			c := dialHTTP(t, srv.URL).(*httpClient)
			c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
			c.notify(t, protocol.NotificationInitialized, nil)
			for i := range 2 {
				if got := callText(t, c.request(t, protocol.MethodToolsCall, echoParams("x"))); got != "x" {
					t.Fatalf("call %d answered %q", i, got)
				}
			}
			if resp := c.do(t, http.MethodPost, encode(t, 50, protocol.MethodToolsList, nil), nil); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("after expiry: status %d, want 404", resp.StatusCode)
			}
			c.sid = ""
			c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
			c.notify(t, protocol.NotificationInitialized, nil)
			callText(t, c.request(t, protocol.MethodToolsCall, echoParams("again")))
		})
	}
}

func TestExpireLegacySession(t *testing.T) {
	srv := serve(t, Options{Transport: TransportSSE, ExpireSessionAfter: 1})
	c := dialLegacy(t, srv.URL).(*streamClient)
	c.request(t, protocol.MethodInitialize, initParams(protocol.Version20241105))
	c.notify(t, protocol.NotificationInitialized, nil)
	callText(t, c.request(t, protocol.MethodToolsCall, echoParams("x")))
	resp, err := oneShot.Post(c.endpoint, "application/json", bytes.NewReader(encode(t, 9, protocol.MethodToolsList, nil)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("after expiry: status %d, want 404", resp.StatusCode)
	}
}

func Test5xxBurst(t *testing.T) {
	srv := serve(t, Options{Transport: TransportHTTP, HTTP5xx: 2})
	c := dialHTTP(t, srv.URL).(*httpClient)
	c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
	initialized := encode(t, 0, protocol.NotificationInitialized, nil)
	var got []int
	for range 4 {
		got = append(got, c.do(t, http.MethodPost, initialized, nil).StatusCode)
	}
	if want := []int{503, 503, 202, 202}; !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	callText(t, c.request(t, protocol.MethodToolsCall, echoParams("ok")))
}

// TestDropStreamResume: the tools/call stream ends after its priming
// event; a GET with its Last-Event-ID delivers the response (the
// conformance suite's sse-retry scenario).
func TestDropStreamResume(t *testing.T) {
	for _, tc := range []struct {
		name        string
		latency     time.Duration
		noGetStream bool
	}{
		{"at once", 0, false},
		{"latency", 100 * time.Millisecond, false},
		{"no GET stream", 0, true}, // resumption is not the standalone stream
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, Options{Transport: TransportHTTP, SSEResponses: true, DropStream: true, Latency: tc.latency,
				NoGetStream: tc.noGetStream, SSERetry: 700 * time.Millisecond})
			c := dialHTTP(t, srv.URL).(*httpClient)
			c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
			if resp := c.do(t, http.MethodPost, encode(t, 0, protocol.NotificationInitialized, nil), nil); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("initialized: status %d", resp.StatusCode)
			}

			resp := c.do(t, http.MethodPost, encode(t, 42, protocol.MethodToolsCall, echoParams("resumed")), nil)
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
				t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
			}
			r := newSSEReader(resp.Body)
			priming, err := r.next()
			if err != nil || !priming.hasID || priming.id == "" || priming.data != "" || priming.retry != "700" {
				t.Fatalf("priming event %+v, %v", priming, err)
			}
			if ev, err := r.next(); err != io.EOF {
				t.Fatalf("after priming: %+v, %v; want the end of the stream", ev, err)
			}

			get := c.do(t, http.MethodGet, nil, map[string]string{headerLastEventID: priming.id})
			if get.StatusCode != http.StatusOK {
				t.Fatalf("resume: status %d", get.StatusCode)
			}
			m := readResponse(t, get, protocol.Int64ID(42))
			if got := callText(t, m); got != "resumed" {
				t.Fatalf("resumed response %q", got)
			}
			// The resumed stream ends after the response.
			if ev, err := newSSEReader(get.Body).next(); err != io.EOF {
				t.Fatalf("after the response: %+v, %v", ev, err)
			}
		})
	}
}

// TestResumeGetStream: notifications sent while the standalone stream was
// down are replayed after its Last-Event-ID.
func TestResumeGetStream(t *testing.T) {
	srv := serve(t, Options{Transport: TransportHTTP})
	c := dialHTTP(t, srv.URL).(*httpClient)
	c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
	c.notify(t, protocol.NotificationInitialized, nil) // opens one GET stream
	announce := func(name string) {
		c.request(t, protocol.MethodToolsCall, map[string]any{"name": "announce", "arguments": map[string]any{"text": name}})
	}
	announce("a")
	waitNote(t, c, protocol.NotificationToolsListChanged)

	ctx, cancel := context.WithCancel(testwait.Context(t))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	req.Header.Set(headerSessionID, c.sid)
	resp, err := http.DefaultClient.Do(req) // takes the stream over
	if err != nil {
		t.Fatal(err)
	}
	announce("b")
	ev, err := newSSEReader(resp.Body).next()
	if err != nil || !ev.hasID {
		t.Fatalf("event %+v, %v", ev, err)
	}
	cancel()
	resp.Body.Close()
	announce("c")
	announce("d")
	get := c.do(t, http.MethodGet, nil, map[string]string{headerLastEventID: ev.id})
	r := newSSEReader(get.Body)
	for range 2 {
		ev, err := r.next()
		if err != nil || message(t, []byte(ev.data)).Method != protocol.NotificationToolsListChanged {
			t.Fatalf("replayed %+v, %v", ev, err)
		}
	}
}

func TestFirstByteDelay(t *testing.T) {
	const delay = 200 * time.Millisecond
	srv := serve(t, Options{Transport: TransportHTTP, FirstByteDelay: delay})
	c := dialHTTP(t, srv.URL)
	start := time.Now()
	c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
	if d := time.Since(start); d < delay {
		t.Fatalf("answered after %v, want at least %v", d, delay)
	}
}

func TestGarbageHTTP(t *testing.T) {
	srv := serve(t, Options{Transport: TransportHTTP, Garbage: true})
	c := dialHTTP(t, srv.URL).(*httpClient)
	resp := c.do(t, http.MethodPost, encode(t, 1, protocol.MethodInitialize, initParams(protocol.Version20251125)), nil)
	b, _ := io.ReadAll(resp.Body)
	if json.Valid(b) || !bytes.Contains(b, []byte(`"result"`)) {
		t.Fatalf("body %q is valid JSON or lacks the answer", b)
	}
}

func TestOversizeHTTP(t *testing.T) {
	const size = 1 << 20
	srv := serve(t, Options{Transport: TransportHTTP, OversizeBytes: size})
	c := dialHTTP(t, srv.URL).(*httpClient)
	c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
	c.notify(t, protocol.NotificationInitialized, nil)
	resp := c.do(t, http.MethodPost, encode(t, 2, protocol.MethodToolsCall, echoParams("x")), nil)
	b, _ := io.ReadAll(resp.Body)
	if len(b) < size || !json.Valid(b) {
		t.Fatalf("body of %d bytes (valid %v), want a JSON answer of at least %d", len(b), json.Valid(b), size)
	}
}

// TestExitAfterHTTP: the exit fault kills the server like a process exit.
func TestExitAfterHTTP(t *testing.T) {
	srv := serve(t, Options{Transport: TransportHTTP, ExitAfter: 1})
	c := dialHTTP(t, srv.URL).(*httpClient)
	c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
	c.notify(t, protocol.NotificationInitialized, nil)
	callText(t, c.request(t, protocol.MethodToolsCall, echoParams("x")))
	req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(encode(t, 3, protocol.MethodToolsCall, echoParams("y"))))
	req.Header.Set(headerSessionID, c.sid)
	if resp, err := oneShot.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("call after the exit point answered %d", resp.StatusCode)
	}
	select {
	case <-srv.Done():
	case <-time.After(waitFor):
		t.Fatal("server still running")
	}
	if code := srv.ExitCode(); code != 3 {
		t.Fatalf("exit code %d, want 3", code)
	}
}

func TestHangOnCallHTTP(t *testing.T) {
	srv := serve(t, Options{Transport: TransportHTTP, HangOnCall: true})
	c := dialHTTP(t, srv.URL).(*httpClient)
	c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
	c.notify(t, protocol.NotificationInitialized, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(encode(t, 2, protocol.MethodToolsCall, echoParams("x"))))
	req.Header.Set(headerSessionID, c.sid)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("hung call answered %d", resp.StatusCode)
	}
	if m := c.request(t, protocol.MethodPing, nil); m.Error != nil {
		t.Fatalf("ping after a hung call: %v", m.Error)
	}
}

func TestLegacyEndpoints(t *testing.T) {
	srv := serve(t, Options{Transport: TransportSSE})
	base := strings.TrimSuffix(srv.URL, "/sse")
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodPost, "/sse", http.StatusMethodNotAllowed},
		{http.MethodPost, "/message?sessionId=nope", http.StatusNotFound},
		{http.MethodPost, "/mcp", http.StatusNotFound},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(`{}`))
		resp, err := oneShot.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
		}
	}
}

func TestWebSocketSubprotocol(t *testing.T) {
	srv := serve(t, Options{Transport: TransportWS})
	_, resp, err := websocket.Dial(testwait.Context(t), srv.URL, &websocket.DialOptions{Subprotocols: []string{"other"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("dial without mcp: %v, %+v", err, resp)
	}
}

// TestCloseEndsStreams: Close ends GET and listen streams (listen with a
// complete result) and returns promptly.
func TestCloseEndsStreams(t *testing.T) {
	srv := serve(t, Options{Transport: TransportHTTP})
	c := dialHTTP(t, srv.URL).(*httpClient)
	c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
	c.notify(t, protocol.NotificationInitialized, nil)
	listen := statelessPost(t, srv.URL, 5, protocol.MethodSubscriptionsListen, listenReq(), nil)
	r := newSSEReader(listen.Body)
	if ev, err := r.next(); err != nil || message(t, []byte(ev.data)).Method != protocol.NotificationSubscriptionsAck {
		t.Fatalf("first listen event %+v, %v", ev, err)
	}
	start := time.Now()
	srv.Close()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close took %v", d)
	}
	ev, err := r.next()
	if err != nil {
		t.Fatal(err)
	}
	m := message(t, []byte(ev.data))
	var res struct {
		ResultType string `json:"resultType"`
	}
	result(t, m, &res)
	if m.ID != protocol.Int64ID(5) || res.ResultType != "complete" {
		t.Fatalf("last listen message %s", ev.data)
	}
}

// TestHandlerClose: NewHandler's Close lets an httptest.Server close
// although a standalone stream is open.
func TestHandlerClose(t *testing.T) {
	h, err := NewHandler(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	c := dialHTTP(t, ts.URL+"/mcp")
	c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
	c.notify(t, protocol.NotificationInitialized, nil) // opens the GET stream
	h.(io.Closer).Close()
	closed := make(chan struct{})
	go func() {
		ts.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(waitFor):
		t.Fatal("httptest.Server.Close hangs")
	}
	if _, err := NewHandler(Options{Transport: TransportStdio}); err == nil {
		t.Fatal("a stdio handler")
	}
}

// TestCloseWebSocket: Close says goodbye to WebSocket clients.
func TestCloseWebSocket(t *testing.T) {
	srv := serve(t, Options{Transport: TransportWS})
	conn, _, err := websocket.Dial(testwait.Context(t), srv.URL, &websocket.DialOptions{Subprotocols: []string{"mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	read := make(chan error, 1)
	go func() {
		_, _, err := conn.Read(context.Background())
		read <- err
	}()
	srv.Close()
	select {
	case err := <-read:
		if websocket.CloseStatus(err) != websocket.StatusGoingAway {
			t.Fatalf("read: %v, want going away", err)
		}
	case <-time.After(waitFor):
		t.Fatal("no close")
	}
}

// Paths under /mcp/ are virtual servers of the same process: a session
// opens on each, and a path outside /mcp is not found.
func TestVirtualServerPaths(t *testing.T) {
	srv := serve(t, Options{Transport: TransportHTTP})
	for _, path := range []string{"/a", "/server-0042"} {
		c := dialHTTP(t, srv.URL+path)
		c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Post(strings.TrimSuffix(srv.URL, "/mcp")+"/other", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("POST /other: %d, want 404", resp.StatusCode)
	}
}
