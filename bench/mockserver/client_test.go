package mockserver

// Minimal test clients for the HTTP transports, written against the wire
// (net/http, coder/websocket) so that the mock server is tested without
// mcpvisor's own client transports.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// waitFor bounds every wait of the tests.
const waitFor = 10 * time.Second

// oneShot makes the tests' requests whose answers are not streams: each
// ends, body included, within waitFor. (Requests with a stream for an
// answer carry a testwait.Context.)
var oneShot = &http.Client{Timeout: waitFor}

// sseEvent is one event as read off the wire, empty data included.
type sseEvent struct {
	id, typ, data, retry string
	hasID, hasData       bool
}

// sseReader parses an event stream (LF line endings, as the mock writes).
type sseReader struct{ br *bufio.Reader }

func newSSEReader(r io.Reader) *sseReader { return &sseReader{br: bufio.NewReader(r)} }

// next returns the next event (any event with at least one field).
func (r *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	fields := 0
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if fields > 0 {
				return ev, nil
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		fields++
		switch name {
		case "id":
			ev.id, ev.hasID = value, true
		case "event":
			ev.typ = value
		case "retry":
			ev.retry = value
		case "data":
			if ev.hasData {
				ev.data += "\n"
			}
			ev.data += value
			ev.hasData = true
		}
	}
}

// message decodes a JSON-RPC message or fails the test.
func message(t *testing.T, data []byte) *protocol.Message {
	t.Helper()
	m, err := protocol.Decode(data)
	if err != nil {
		t.Fatalf("decoding %q: %v", data, err)
	}
	return m
}

// rpcClient is one client of a mock server over some transport.
type rpcClient interface {
	// request sends a request and returns its response.
	request(t *testing.T, method string, params any) *protocol.Message
	// notify sends a notification.
	notify(t *testing.T, method string, params any)
	// notes delivers the notifications the server sends unsolicited.
	notes() <-chan *protocol.Message
}

// waitNote returns the next notification called method.
func waitNote(t *testing.T, c rpcClient, method string) *protocol.Message {
	t.Helper()
	timeout := time.After(waitFor)
	for {
		select {
		case m := <-c.notes():
			if m.Method == method {
				return m
			}
		case <-timeout:
			t.Fatalf("no %s within %v", method, waitFor)
			return nil
		}
	}
}

func encode(t *testing.T, id int64, method string, params any) []byte {
	t.Helper()
	var rid protocol.ID
	if id != 0 {
		rid = protocol.Int64ID(id)
	}
	b, err := protocol.AppendRequest(nil, rid, method, params)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// httpClient speaks Streamable HTTP with a session (2025-03-26 …
// 2025-11-25).
type httpClient struct {
	url     string
	sid     string
	version string
	id      int64
	ch      chan *protocol.Message
}

func dialHTTP(t *testing.T, url string) rpcClient {
	return &httpClient{url: url, ch: make(chan *protocol.Message, 16)}
}

func (c *httpClient) notes() <-chan *protocol.Message { return c.ch }

// do POSTs body with the session headers plus extra ones.
func (c *httpClient) do(t *testing.T, method string, body []byte, extra map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(testwait.Context(t), method, c.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set(headerSessionID, c.sid)
	}
	if c.version != "" {
		req.Header.Set(headerProtocolVersion, c.version)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, c.url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func (c *httpClient) request(t *testing.T, method string, params any) *protocol.Message {
	t.Helper()
	c.id++
	resp := c.do(t, http.MethodPost, encode(t, c.id, method, params), nil)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: status %d: %s", method, resp.StatusCode, b)
	}
	m := readResponse(t, resp, protocol.Int64ID(c.id))
	if method == protocol.MethodInitialize {
		c.sid = resp.Header.Get(headerSessionID)
		var res protocol.InitializeResult
		if err := json.Unmarshal(m.Result, &res); err != nil {
			t.Fatal(err)
		}
		c.version = res.ProtocolVersion
	}
	return m
}

// readResponse reads the response to id from a JSON or event-stream body.
func readResponse(t *testing.T, resp *http.Response, id protocol.ID) *protocol.Message {
	t.Helper()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return message(t, b)
	}
	r := newSSEReader(resp.Body)
	for {
		ev, err := r.next()
		if err != nil {
			t.Fatalf("event stream ended before the response to %v: %v", id, err)
		}
		if ev.data == "" {
			continue // priming
		}
		if m := message(t, []byte(ev.data)); m.Kind == protocol.KindResponse && m.ID == id {
			return m
		}
	}
}

func (c *httpClient) notify(t *testing.T, method string, params any) {
	t.Helper()
	resp := c.do(t, http.MethodPost, encode(t, 0, method, params), nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%s: status %d, want 202", method, resp.StatusCode)
	}
	if method == protocol.NotificationInitialized {
		c.openStream(t)
	}
}

// openStream opens the standalone GET stream; its messages go to notes.
func (c *httpClient) openStream(t *testing.T) {
	t.Helper()
	resp := c.do(t, http.MethodGet, nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: status %d", resp.StatusCode)
	}
	go func() {
		r := newSSEReader(resp.Body)
		for {
			ev, err := r.next()
			if err != nil {
				return
			}
			if m, err := protocol.Decode([]byte(ev.data)); err == nil {
				c.ch <- m
			}
		}
	}()
}

// streamClient is the common half of the legacy SSE and WebSocket
// clients: a reader goroutine sorts responses from notifications.
type streamClient struct {
	endpoint  string // the legacy session's POST endpoint
	id        int64
	responses chan *protocol.Message
	ch        chan *protocol.Message
	send      func(t *testing.T, frame []byte)
}

func newStreamClient() *streamClient {
	return &streamClient{responses: make(chan *protocol.Message, 16), ch: make(chan *protocol.Message, 16)}
}

func (c *streamClient) notes() <-chan *protocol.Message { return c.ch }

func (c *streamClient) received(data []byte) {
	m, err := protocol.Decode(data)
	if err != nil {
		return
	}
	if m.Kind == protocol.KindResponse {
		c.responses <- m
	} else {
		c.ch <- m
	}
}

func (c *streamClient) request(t *testing.T, method string, params any) *protocol.Message {
	t.Helper()
	c.id++
	c.send(t, encode(t, c.id, method, params))
	timeout := time.After(waitFor)
	for {
		select {
		case m := <-c.responses:
			if m.ID == protocol.Int64ID(c.id) {
				return m
			}
		case <-timeout:
			t.Fatalf("no response to %s within %v", method, waitFor)
		}
	}
}

func (c *streamClient) notify(t *testing.T, method string, params any) {
	t.Helper()
	c.send(t, encode(t, 0, method, params))
}

// dialLegacy opens an HTTP+SSE session (2024-11-05).
func dialLegacy(t *testing.T, sseURL string) rpcClient {
	t.Helper()
	c := newStreamClient()
	r, endpoint := openLegacy(t, sseURL)
	c.endpoint = endpoint
	go func() {
		for {
			ev, err := r.next()
			if err != nil {
				return
			}
			if ev.typ == "message" {
				c.received([]byte(ev.data))
			}
		}
	}()
	c.send = func(t *testing.T, frame []byte) {
		t.Helper()
		resp, err := oneShot.Post(endpoint, "application/json", bytes.NewReader(frame))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST %s: status %d, want 202", endpoint, resp.StatusCode)
		}
	}
	return c
}

// dialWS opens a WebSocket with the mcp subprotocol.
func dialWS(t *testing.T, wsURL string) rpcClient {
	t.Helper()
	c := newStreamClient()
	conn, _, err := websocket.Dial(testwait.Context(t), wsURL, &websocket.DialOptions{Subprotocols: []string{"mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	if conn.Subprotocol() != "mcp" {
		t.Fatalf("subprotocol %q, want mcp", conn.Subprotocol())
	}
	t.Cleanup(func() { conn.CloseNow() })
	var wmu sync.Mutex
	go func() {
		for {
			typ, data, err := conn.Read(context.Background())
			if err != nil {
				return
			}
			if typ == websocket.MessageText {
				c.received(data)
			}
		}
	}()
	c.send = func(t *testing.T, frame []byte) {
		t.Helper()
		wmu.Lock()
		defer wmu.Unlock()
		if err := conn.Write(testwait.Context(t), websocket.MessageText, frame); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	return c
}

// postNoFail POSTs body in the client's session, returning the error
// rather than failing (for use outside the test's goroutine).
func postNoFail(c *httpClient, body []byte) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set(headerSessionID, c.sid)
	return oneShot.Do(req)
}
