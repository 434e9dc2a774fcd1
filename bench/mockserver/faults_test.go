package mockserver

// Tests of the fault modes a client must survive: a crash in the middle
// of an answer, a server that demands authorization, and a flapping one.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// cutText is what the crash tests ask echo for: long enough that half of
// the answer holds more than its envelope.
var cutText = strings.Repeat("c", 100)

// halfAnswer returns the full echo answer to id for text, as the server
// encodes it, and its first half, which is all a crashing server writes.
func halfAnswer(t *testing.T, id int64, text string) (full, half []byte) {
	t.Helper()
	full, err := protocol.AppendResult(nil, protocol.Int64ID(id),
		protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(text)}})
	if err != nil {
		t.Fatal(err)
	}
	return full, full[:len(full)/2]
}

// waitCrash waits until the in-process server has died of the crash.
func waitCrash(t *testing.T, srv *Server) {
	t.Helper()
	select {
	case <-srv.Done():
	case <-time.After(waitFor):
		t.Fatal("server still running after the crash")
	}
	if code := srv.ExitCode(); code != exitCrash {
		t.Fatalf("exit code %d, want %d", code, exitCrash)
	}
}

// TestStdioCrashMidResponse: the answer to tools/call stops halfway, with
// no newline, and Run returns 5.
func TestStdioCrashMidResponse(t *testing.T) {
	s := runStdio(t, Options{CrashMidResponse: true})
	s.send(t, encode(t, 1, protocol.MethodInitialize, initParams(protocol.Version20251125)))
	s.recv(t)
	s.send(t, encode(t, 0, protocol.NotificationInitialized, nil))
	s.send(t, encode(t, 2, protocol.MethodToolsCall, echoParams(cutText)))
	rest, err := s.out.Rest("the mock server's output to end after the crash")
	if err != nil {
		t.Fatal(err)
	}
	if _, half := halfAnswer(t, 2, cutText); rest != string(half) {
		t.Fatalf("after the call the output is %q, want only %q", rest, half)
	}
	select {
	case code := <-s.code:
		s.code <- code
		if code != exitCrash {
			t.Fatalf("exit code %d, want %d", code, exitCrash)
		}
	case <-time.After(waitFor):
		t.Fatal("Run did not exit")
	}
}

// TestCrashMidResponse: over every HTTP-based mode the client sees the
// first half of the answer, then the connection ends, and the server is
// dead.
func TestCrashMidResponse(t *testing.T) {
	t.Run("http-json", func(t *testing.T) {
		srv := serve(t, Options{Transport: TransportHTTP, CrashMidResponse: true})
		c := dialHTTP(t, srv.URL).(*httpClient)
		c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
		c.notify(t, protocol.NotificationInitialized, nil)
		resp := c.do(t, http.MethodPost, encode(t, 7, protocol.MethodToolsCall, echoParams(cutText)), nil)
		body, err := io.ReadAll(resp.Body)
		full, half := halfAnswer(t, 7, cutText)
		if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(full)) {
			t.Fatalf("status %d, Content-Length %d; want 200 and %d", resp.StatusCode, resp.ContentLength, len(full))
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Equal(body, half) {
			t.Fatalf("body %q, %v; want %q and an unexpected EOF", body, err, half)
		}
		waitCrash(t, srv)
	})
	t.Run("http-sse", func(t *testing.T) {
		srv := serve(t, Options{Transport: TransportHTTP, SSEResponses: true, CrashMidResponse: true})
		c := dialHTTP(t, srv.URL).(*httpClient)
		c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
		c.notify(t, protocol.NotificationInitialized, nil)
		resp := c.do(t, http.MethodPost, encode(t, 7, protocol.MethodToolsCall, echoParams(cutText)), nil)
		body, err := io.ReadAll(resp.Body)
		if err == nil {
			t.Fatal("the event stream ended cleanly")
		}
		lines := strings.Split(string(body), "\n")
		if _, half := halfAnswer(t, 7, cutText); lines[len(lines)-1] != "data: "+string(half) {
			t.Fatalf("the stream %q does not stop halfway through the answer's data line", body)
		}
		waitCrash(t, srv)
	})
	t.Run("http-stateless", func(t *testing.T) {
		srv := serve(t, Options{Transport: TransportHTTP, CrashMidResponse: true})
		params := modernParams(protocol.Version20260728, echoParams(cutText))
		resp := statelessPost(t, srv.URL, 7, protocol.MethodToolsCall, params, map[string]string{headerName: "echo"})
		body, err := io.ReadAll(resp.Body)
		if _, half := halfAnswer(t, 7, cutText); !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Equal(body, half) {
			t.Fatalf("body %q, %v; want %q and an unexpected EOF", body, err, half)
		}
		waitCrash(t, srv)
	})
	t.Run("sse", func(t *testing.T) {
		srv := serve(t, Options{Transport: TransportSSE, CrashMidResponse: true})
		stream, endpoint := openLegacy(t, srv.URL)
		post := func(frame []byte) {
			resp, err := oneShot.Post(endpoint, "application/json", bytes.NewReader(frame))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		post(encode(t, 1, protocol.MethodInitialize, initParams(protocol.Version20241105)))
		if ev, err := stream.next(); err != nil || message(t, []byte(ev.data)).ID != protocol.Int64ID(1) {
			t.Fatalf("initialize answered %+v, %v", ev, err)
		}
		post(encode(t, 0, protocol.NotificationInitialized, nil))
		// The crash may cut this POST's own connection before its 202,
		// as a dying process would: only the stream is checked.
		if resp, err := oneShot.Post(endpoint, "application/json", bytes.NewReader(encode(t, 7, protocol.MethodToolsCall, echoParams(cutText)))); err == nil {
			resp.Body.Close()
		}
		rest, err := io.ReadAll(stream.br)
		if _, half := halfAnswer(t, 7, cutText); err == nil || string(rest) != "event: message\ndata: "+string(half) {
			t.Fatalf("the stream went on with %q, %v; want the answer's event cut halfway", rest, err)
		}
		waitCrash(t, srv)
	})
	t.Run("ws", func(t *testing.T) {
		srv := serve(t, Options{Transport: TransportWS, CrashMidResponse: true})
		conn, _, err := websocket.Dial(testwait.Context(t), srv.URL, &websocket.DialOptions{Subprotocols: []string{"mcp"}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		write := func(frame []byte) {
			if err := conn.Write(testwait.Context(t), websocket.MessageText, frame); err != nil {
				t.Fatal(err)
			}
		}
		write(encode(t, 1, protocol.MethodInitialize, initParams(protocol.Version20251125)))
		if _, data, err := conn.Read(testwait.Context(t)); err != nil || message(t, data).ID != protocol.Int64ID(1) {
			t.Fatalf("initialize answered %s, %v", data, err)
		}
		write(encode(t, 0, protocol.NotificationInitialized, nil))
		write(encode(t, 7, protocol.MethodToolsCall, echoParams(cutText)))
		_, r, err := conn.Reader(testwait.Context(t))
		if err != nil {
			t.Fatalf("no message begins: %v", err)
		}
		got, err := io.ReadAll(r)
		if _, half := halfAnswer(t, 7, cutText); err == nil || !bytes.Equal(got, half) {
			t.Fatalf("message %q, %v; want %q and a read error", got, err, half)
		}
		waitCrash(t, srv)
	})
}

// openLegacy opens an HTTP+SSE session by hand and returns its stream,
// past the endpoint event, and its POST endpoint.
func openLegacy(t *testing.T, sseURL string) (*sseReader, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(testwait.Context(t), http.MethodGet, sseURL, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	r := newSSEReader(resp.Body)
	ev, err := r.next()
	if err != nil || ev.typ != "endpoint" {
		t.Fatalf("first event %+v, %v; want endpoint", ev, err)
	}
	base, _ := url.Parse(sseURL)
	endpoint, err := base.Parse(ev.data)
	if err != nil {
		t.Fatal(err)
	}
	return r, endpoint.String()
}

// TestProcessCrashMidResponse: over HTTP, the process itself exits with
// code 5 after writing half the answer.
func TestProcessCrashMidResponse(t *testing.T) {
	p := startProcess(t, "-transport", "http", "-crash-mid-response")
	c := dialHTTP(t, p.url).(*httpClient)
	c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
	c.notify(t, protocol.NotificationInitialized, nil)
	resp := c.do(t, http.MethodPost, encode(t, 2, protocol.MethodToolsCall, echoParams(cutText)), nil)
	body, err := io.ReadAll(resp.Body)
	if _, half := halfAnswer(t, 2, cutText); !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Equal(body, half) {
		t.Fatalf("body %q, %v; want %q and an unexpected EOF", body, err, half)
	}
	if code := p.wait(t); code != exitCrash {
		t.Fatalf("exit code %d, want %d", code, exitCrash)
	}
}

// TestHTTP401: every request of every HTTP-based mode, the WebSocket
// upgrade included, gets 401 with a Bearer challenge that points at the
// protected resource metadata.
func TestHTTP401(t *testing.T) {
	check := func(t *testing.T, resp *http.Response, base string) {
		t.Helper()
		want := `Bearer resource_metadata="` + base + `/.well-known/oauth-protected-resource", error="invalid_token"`
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
			t.Fatalf("status %d, WWW-Authenticate %q; want 401 and %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
		}
	}
	for _, tc := range []struct {
		name, transport, method, path string
		body                          []byte
	}{
		{"initialize", TransportHTTP, http.MethodPost, "/mcp", encode(t, 1, protocol.MethodInitialize, initParams(protocol.Version20251125))},
		{"discover", TransportHTTP, http.MethodPost, "/mcp", encode(t, 1, protocol.MethodDiscover, modernParams(protocol.Version20260728, nil))},
		{"GET stream", TransportHTTP, http.MethodGet, "/mcp", nil},
		{"metadata", TransportHTTP, http.MethodGet, "/.well-known/oauth-protected-resource", nil},
		{"legacy stream", TransportSSE, http.MethodGet, "/sse", nil},
		{"legacy POST", TransportSSE, http.MethodPost, "/message?sessionId=x", encode(t, 1, protocol.MethodInitialize, initParams(protocol.Version20241105))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, Options{Transport: tc.transport, HTTP401: true})
			u, _ := url.Parse(srv.URL)
			base := "http://" + u.Host
			req, _ := http.NewRequestWithContext(testwait.Context(t), tc.method, base+tc.path, bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			check(t, resp, base)
			var body struct {
				Error string `json:"error"`
			}
			if b, _ := io.ReadAll(resp.Body); json.Unmarshal(b, &body) != nil || body.Error != "invalid_token" {
				t.Fatalf("body %q", b)
			}
		})
	}
	t.Run("ws upgrade", func(t *testing.T) {
		srv := serve(t, Options{Transport: TransportWS, HTTP401: true})
		_, resp, err := websocket.Dial(testwait.Context(t), srv.URL, &websocket.DialOptions{Subprotocols: []string{"mcp"}})
		if err == nil || resp == nil {
			t.Fatalf("dial: %v, %+v; want a refused upgrade", err, resp)
		}
		u, _ := url.Parse(srv.URL)
		check(t, resp, "http://"+u.Host)
	})
}

// TestStdioFlap: over stdio a flapping server serves for FlapUp, then
// stops writing and exits with code 6; FlapDown is its supervisor's
// business.
func TestStdioFlap(t *testing.T) {
	s := runStdio(t, Options{FlapUp: 500 * time.Millisecond, FlapDown: time.Hour})
	s.send(t, encode(t, 1, protocol.MethodInitialize, initParams(protocol.Version20251125)))
	var init protocol.InitializeResult
	result(t, message(t, s.recv(t)), &init)
	select {
	case code := <-s.code:
		s.code <- code
		if code != exitFlap {
			t.Fatalf("exit code %d, want %d", code, exitFlap)
		}
	case <-time.After(waitFor):
		t.Fatal("Run did not exit")
	}
	if rest, err := s.out.Rest("the mock server's output to end as it goes down"); err != nil || len(rest) > 0 {
		t.Fatalf("output after going down: %q, %v", rest, err)
	}
}

// listening reports whether something accepts connections on addr.
func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// eventually polls cond until it holds, for at most waitFor.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s within %v", what, waitFor)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFlap: a flapping server cuts every open connection and refuses new
// ones while down, then listens again at the same URL, where the sessions
// of before are unknown and new ones work.
//
// The test drives the cycle by hand, with the down and up the flapping
// goroutine runs on its timer (TestFlapEndsWithServer runs the timer), so
// that each check falls in the period it is about however slow the
// machine: on a 500 ms timer, a check that outlasted its up period met the
// next down (under load, TestFlap/ws's new session got no answer to
// initialize).
func TestFlap(t *testing.T) {
	for _, tc := range []struct {
		transport string
		// open starts a session and returns a channel that gets the error
		// ending its open connection, and a check of the session once the
		// server is back.
		open func(t *testing.T, url string) (cut <-chan error, afterwards func(t *testing.T))
	}{
		{TransportHTTP, func(t *testing.T, url string) (<-chan error, func(*testing.T)) {
			c := dialHTTP(t, url).(*httpClient)
			c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
			c.do(t, http.MethodPost, encode(t, 0, protocol.NotificationInitialized, nil), nil)
			get := c.do(t, http.MethodGet, nil, nil)
			return readErr(get.Body), func(t *testing.T) {
				if resp := c.do(t, http.MethodPost, encode(t, 9, protocol.MethodToolsList, nil), nil); resp.StatusCode != http.StatusNotFound {
					t.Fatalf("old session: status %d, want 404", resp.StatusCode)
				}
				c.sid = ""
				c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
				c.notify(t, protocol.NotificationInitialized, nil)
				callText(t, c.request(t, protocol.MethodToolsCall, echoParams("back")))
			}
		}},
		{TransportSSE, func(t *testing.T, url string) (<-chan error, func(*testing.T)) {
			stream, endpoint := openLegacy(t, url)
			return readErr(stream.br), func(t *testing.T) {
				resp, err := oneShot.Post(endpoint, "application/json", bytes.NewReader(encode(t, 9, protocol.MethodToolsList, nil)))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound {
					t.Fatalf("old session: status %d, want 404", resp.StatusCode)
				}
				c := dialLegacy(t, url)
				c.request(t, protocol.MethodInitialize, initParams(protocol.Version20241105))
				c.notify(t, protocol.NotificationInitialized, nil)
				callText(t, c.request(t, protocol.MethodToolsCall, echoParams("back")))
			}
		}},
		{TransportWS, func(t *testing.T, url string) (<-chan error, func(*testing.T)) {
			conn, _, err := websocket.Dial(testwait.Context(t), url, &websocket.DialOptions{Subprotocols: []string{"mcp"}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.CloseNow() })
			cut := make(chan error, 1)
			go func() {
				_, _, err := conn.Read(context.Background())
				cut <- err
			}()
			return cut, func(t *testing.T) {
				c := dialWS(t, url)
				c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
				c.notify(t, protocol.NotificationInitialized, nil)
				callText(t, c.request(t, protocol.MethodToolsCall, echoParams("back")))
			}
		}},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, Options{Transport: tc.transport})
			u, _ := url.Parse(srv.URL)
			cut, afterwards := tc.open(t, srv.URL)
			srv.down() // the end of an up period
			if err := testwait.RecvWithin(t, cut, waitFor, "the open connection to be cut by the down period"); err == nil {
				t.Fatal("the open connection ended cleanly")
			}
			if listening(u.Host) {
				t.Fatal("connections are accepted while down")
			}
			ln, err := net.Listen("tcp", srv.addr) // the end of the down period
			if err != nil {
				t.Fatal(err)
			}
			srv.up(ln)
			if !listening(u.Host) {
				t.Fatal("not listening again at the same address")
			}
			afterwards(t)
		})
	}
}

// readErr reads r to its end in another goroutine and delivers the error
// that ends it (nil for a clean end).
func readErr(r io.Reader) <-chan error {
	cut := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, r)
		cut <- err
	}()
	return cut
}

// TestFlapEndsWithServer: Close and the end of Serve's context end the
// flapping cycle: once the server is done, nothing listens on its
// address again.
func TestFlapEndsWithServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*Server, context.CancelFunc)
	}{
		{"Close", func(srv *Server, _ context.CancelFunc) { srv.Close() }},
		{"context", func(_ *Server, cancel context.CancelFunc) { cancel() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			srv, err := Serve(ctx, Options{Transport: TransportHTTP, FlapUp: 50 * time.Millisecond, FlapDown: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			u, _ := url.Parse(srv.URL)
			eventually(t, "down", func() bool { return !listening(u.Host) })
			eventually(t, "up again", func() bool { return listening(u.Host) })
			tc.stop(srv, cancel)
			select {
			case <-srv.Done():
			case <-time.After(waitFor):
				t.Fatal("the server did not stop")
			}
			select {
			case <-srv.flapped:
			default:
				t.Fatal("the flapping goroutine outlived the server")
			}
			if listening(u.Host) {
				t.Fatal("something listens on the stopped server's address")
			}
		})
	}
}

// TestProcessFlapStdinEOF: a flapping HTTP server process still exits
// with 0 at the end of its stdin.
func TestProcessFlapStdinEOF(t *testing.T) {
	p := startProcess(t, "-transport", "http", "-flap-up", "50ms", "-flap-down", "50ms")
	u, _ := url.Parse(p.url)
	eventually(t, "down", func() bool { return !listening(u.Host) })
	p.stdin.Close()
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d after stdin EOF", code)
	}
}

// TestParseFaultFlags: the fault flags of crash, 401 and flapping.
func TestParseFaultFlags(t *testing.T) {
	o, err := ParseFlags([]string{"-transport", "ws", "-crash-mid-response", "-http-401", "-flap-up", "2s", "-flap-down", "500ms"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.CrashMidResponse || !o.HTTP401 || o.FlapUp != 2*time.Second || o.FlapDown != 500*time.Millisecond {
		t.Fatalf("options %+v", o)
	}
	for _, args := range [][]string{{"-flap-down", "1s"}, {"-flap-up", "-1s"}} {
		if _, err := ParseFlags(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	usage := Usage()
	for _, flag := range []string{"-crash-mid-response", "-http-401", "-flap-up", "-flap-down"} {
		if !strings.Contains(usage, flag+" ") && !strings.Contains(usage, flag+"\n") {
			t.Errorf("Usage lacks %s", flag)
		}
	}
}
