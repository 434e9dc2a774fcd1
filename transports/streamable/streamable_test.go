package streamable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/eventstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a Receiver that keeps what it is given.
type recorder struct {
	mu         sync.Mutex
	frames     []string
	frameErrs  []error
	closed     error
	closedN    int
	closedOnce chan struct{}
}

func newRecorder() *recorder {
	return &recorder{closedOnce: make(chan struct{})}
}

func (r *recorder) Frame(data []byte) {
	r.mu.Lock()
	r.frames = append(r.frames, string(data))
	r.mu.Unlock()
}

func (r *recorder) FrameError(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frameErrs = append(r.frameErrs, err)
}

func (r *recorder) Closed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = err
	r.closedN++
	if r.closedN == 1 {
		close(r.closedOnce)
	}
}

func (r *recorder) Frames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.frames...)
}

func (r *recorder) FrameErrors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.frameErrs...)
}

func dial(t *testing.T, url string, opts Options) (*Conn, *recorder) {
	t.Helper()
	rec := newRecorder()
	c, err := Dial(testwait.Context(t), transports.Config{URL: url, Headers: map[string]string{"X-Api-Key": "secret"}}, opts, rec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(testwait.Context(t)) })
	return c, rec
}

func request(id int64, method string, params string) []byte {
	if params == "" {
		params = "{}"
	}
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
}

func result(id protocol.ID, res string) string {
	idJSON, _ := id.MarshalJSON()
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, idJSON, res)
}

// decodeBody reads a POSTed JSON-RPC message.
func decodeBody(t *testing.T, r *http.Request) *protocol.Message {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Error(err)
		return &protocol.Message{}
	}
	m, err := protocol.Decode(body)
	if err != nil {
		t.Error(err)
		return &protocol.Message{}
	}
	return m
}

func sse(w http.ResponseWriter, events ...eventstream.Event) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, ev := range events {
		_ = eventstream.Write(w, ev, 0)
	}
	w.(http.Flusher).Flush()
}

func TestJSONAnswerIsDeliveredBeforeSendReturns(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		m := decodeBody(t, r)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, result(m.ID, `{"ok":true}`))
	}))
	defer srv.Close()
	c, rec := dial(t, srv.URL, Options{UserAgent: "test/1"})

	require.NoError(t, c.Send(testwait.Context(t), request(1, "tools/list", "")))
	assert.Equal(t, []string{`{"jsonrpc":"2.0","id":1,"result":{"ok":true}}`}, rec.Frames(), "delivered synchronously")
	assert.Equal(t, "application/json, text/event-stream", got.Get("Accept"))
	assert.Equal(t, "application/json", got.Get("Content-Type"))
	assert.Equal(t, "secret", got.Get("X-Api-Key"), "configured headers are sent")
	assert.Equal(t, "test/1", got.Get("User-Agent"))
	assert.Empty(t, got.Get("Mcp-Session-Id"))
}

func TestSessionIDAndVersionHeadersAfterInitialize(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		m := decodeBody(t, r)
		if m.Method == "initialize" {
			w.Header().Set("Mcp-Session-Id", "sess-1")
		}
		if m.Kind != protocol.KindRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, result(m.ID, `{}`))
	}))
	defer srv.Close()
	c, _ := dial(t, srv.URL, Options{})

	require.NoError(t, c.Send(testwait.Context(t), request(1, "initialize", "")))
	c.SetProtocolVersion(protocol.Version20251125)
	require.NoError(t, c.Send(testwait.Context(t), []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)))
	require.NoError(t, c.Send(testwait.Context(t), request(2, "tools/list", "")))
	assert.Equal(t, "sess-1", c.SessionID())

	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, seen[0].Get("Mcp-Session-Id"), "initialize carries no session")
	assert.Empty(t, seen[0].Get("Mcp-Protocol-Version"), "nor a version")
	last := seen[len(seen)-1]
	if last.Get("Accept") == "text/event-stream" { // the GET stream may come last
		last = seen[len(seen)-2]
	}
	assert.Equal(t, "sess-1", last.Get("Mcp-Session-Id"))
	assert.Equal(t, protocol.Version20251125, last.Get("Mcp-Protocol-Version"))
	assert.Empty(t, last.Get("Mcp-Method"), "no mirrored headers in the session eras")
}

func TestSSEAnswerDeliversNotificationsThenTheResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := decodeBody(t, r)
		sse(w,
			eventstream.Event{ID: "1"}, // a priming event: no data
			eventstream.Event{ID: "2", Data: []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`)},
			eventstream.Event{ID: "3", Data: []byte(result(m.ID, `{"done":true}`))},
		)
		// The server keeps the stream open after the response: Send must
		// not wait for it to end.
		<-r.Context().Done()
	}))
	defer srv.Close()
	c, rec := dial(t, srv.URL, Options{})

	require.NoError(t, c.Send(testwait.Context(t), request(7, "tools/call", `{"name":"x"}`)))
	frames := rec.Frames()
	require.Len(t, frames, 2)
	assert.Contains(t, frames[0], "notifications/progress")
	assert.Contains(t, frames[1], `"done":true`)
}

func TestExpiredSessionClosesTheConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := decodeBody(t, r)
		if m.Method == "initialize" {
			w.Header().Set("Mcp-Session-Id", "old")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, result(m.ID, `{}`))
			return
		}
		http.Error(w, "no such session", http.StatusNotFound)
	}))
	defer srv.Close()
	c, rec := dial(t, srv.URL, Options{DisableGetStream: true})
	require.NoError(t, c.Send(testwait.Context(t), request(1, "initialize", "")))

	err := c.Send(testwait.Context(t), request(2, "tools/call", `{"name":"x"}`))
	assert.ErrorIs(t, err, transports.ErrSessionExpired)
	assert.ErrorIs(t, err, transports.ErrClosed)
	assert.Equal(t, transports.ClassSessionExpired, transports.Classify(err))
	testwait.Done(t, rec.closedOnce, "the receiver told of the connection's end")
	assert.ErrorIs(t, rec.closed, transports.ErrSessionExpired)
	assert.ErrorIs(t, c.Send(testwait.Context(t), request(3, "ping", "")), transports.ErrClosed, "a closed connection sends nothing")
}

// Servers built on the TypeScript SDK answer an unknown session with 400
// "No valid session ID provided"; that too is an expired session.
func TestBadRequestAboutTheSessionIsAnExpiredSession(t *testing.T) {
	for body, expired := range map[string]bool{
		`{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`: true,
		`{"jsonrpc":"2.0","error":{"code":-32600,"message":"Bad Request: invalid params"},"id":null}`:               false,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodDelete {
				return
			}
			m := decodeBody(t, r)
			if m.Method == "initialize" {
				w.Header().Set("Mcp-Session-Id", "old")
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, result(m.ID, `{}`))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, body)
		}))
		c, _ := dial(t, srv.URL, Options{DisableGetStream: true})
		require.NoError(t, c.Send(testwait.Context(t), request(1, "initialize", "")))
		err := c.Send(testwait.Context(t), request(2, "tools/list", ""))
		assert.Equal(t, expired, errors.Is(err, transports.ErrSessionExpired), body)
		var se *transports.HTTPStatusError
		if !expired && assert.ErrorAs(t, err, &se) {
			assert.Contains(t, string(se.Body), "invalid params", "the body read for the check is still quoted")
		}
		require.NoError(t, c.Close(testwait.Context(t)))
		srv.Close()
	}
}

func TestNotFoundWithoutSessionIsAnOrdinaryError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	c, _ := dial(t, srv.URL, Options{})
	err := c.Send(testwait.Context(t), request(1, "initialize", ""))
	var status *transports.HTTPStatusError
	require.ErrorAs(t, err, &status)
	assert.Equal(t, 404, status.StatusCode)
	assert.NotErrorIs(t, err, transports.ErrSessionExpired, "no session was known: the URL is wrong")
	assert.Equal(t, transports.ClassHTTP4xx, transports.Classify(err))
}

func TestErrorStatusesAreClassified(t *testing.T) {
	for status, class := range map[int]transports.Class{
		401: transports.ClassAuth, 403: transports.ClassAuth, 429: transports.ClassHTTP5xx,
		500: transports.ClassHTTP5xx, 503: transports.ClassHTTP5xx, 400: transports.ClassHTTP4xx,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="x"`)
			http.Error(w, "nope", status)
		}))
		c, _ := dial(t, srv.URL, Options{})
		err := c.Send(testwait.Context(t), request(1, "tools/list", ""))
		var se *transports.HTTPStatusError
		require.ErrorAs(t, err, &se, status)
		assert.Equal(t, status, se.StatusCode)
		assert.Contains(t, string(se.Body), "nope")
		assert.Equal(t, class, transports.Classify(err), status)
		if class == transports.ClassAuth {
			assert.Equal(t, `Bearer resource_metadata="x"`, se.WWWAuthenticate)
		}
		require.NoError(t, c.Close(testwait.Context(t)))
		srv.Close()
	}
}

func TestJSONRPCErrorInA400BodyIsDeliveredAsTheAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := decodeBody(t, r)
		idJSON, _ := m.ID.MarshalJSON()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"unsupported","data":{"supported":["2025-11-25"]}}}`, idJSON)
	}))
	defer srv.Close()
	c, rec := dial(t, srv.URL, Options{})
	require.NoError(t, c.Send(testwait.Context(t), request(4, "server/discover", "")))
	require.Len(t, rec.Frames(), 1)
	assert.Contains(t, rec.Frames()[0], "-32022")
}

func TestStatelessEraMirrorsMethodAndName(t *testing.T) {
	headers := make(chan http.Header, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Clone()
		m := decodeBody(t, r)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, result(m.ID, `{}`))
	}))
	defer srv.Close()
	c, _ := dial(t, srv.URL, Options{})
	c.SetProtocolVersion(protocol.Version20260728)

	for _, tc := range []struct{ frame, method, name string }{
		{string(request(1, "tools/call", `{"name":"get_weather","arguments":{"city":"x"}}`)), "tools/call", "get_weather"},
		{string(request(2, "resources/read", `{"uri":"file:///a b.txt"}`)), "resources/read", "file:///a b.txt"},
		{string(request(3, "prompts/get", `{"name":"café"}`)), "prompts/get", "=?base64?Y2Fmw6k=?="},
		{string(request(4, "tools/list", ``)), "tools/list", ""},
	} {
		require.NoError(t, c.Send(testwait.Context(t), []byte(tc.frame)))
		h := testwait.Recv(t, headers, "the headers of the request at the server")
		assert.Equal(t, tc.method, h.Get("Mcp-Method"))
		assert.Equal(t, tc.name, h.Get("Mcp-Name"), tc.method)
		assert.Equal(t, protocol.Version20260728, h.Get("Mcp-Protocol-Version"))
	}
}

// The headers of transports.WithRequestHeaders go with the POSTs of the
// stateless era only, and the Conn says so through HeaderCarrier.
func TestRequestHeadersFromTheContext(t *testing.T) {
	headers := make(chan http.Header, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Clone()
		m := decodeBody(t, r)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, result(m.ID, `{}`))
	}))
	defer srv.Close()
	c, _ := dial(t, srv.URL, Options{})
	ctx := transports.WithRequestHeaders(context.Background(), []transports.Header{{Name: "Mcp-Param-Region", Value: "us-west1"}})
	frame := request(1, "tools/call", `{"name":"t","arguments":{"region":"us-west1"}}`)

	c.SetProtocolVersion(protocol.Version20251125)
	assert.False(t, c.CarriesRequestHeaders())
	require.NoError(t, c.Send(ctx, frame))
	assert.Empty(t, testwait.Recv(t, headers, "the headers of the 2025-11-25 POST").Get("Mcp-Param-Region"), "the session eras have no mirrored parameters")

	c.SetProtocolVersion(protocol.Version20260728)
	assert.True(t, c.CarriesRequestHeaders())
	require.NoError(t, c.Send(ctx, frame))
	assert.Equal(t, "us-west1", testwait.Recv(t, headers, "the headers of the 2026-07-28 POST").Get("Mcp-Param-Region"))
	require.NoError(t, c.Send(context.Background(), frame))
	assert.Empty(t, testwait.Recv(t, headers, "the headers of the POST without request headers").Get("Mcp-Param-Region"), "only the request whose context carries them")
}

// A response stream that ends before the response is resumed with GET
// and Last-Event-ID after the server's retry delay, and the response
// arrives on the resumed stream (the conformance suite's sse-retry).
func TestBrokenResponseStreamIsResumed(t *testing.T) {
	var getAt atomic.Int64
	var lastEventID atomic.Value
	var postDone time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			decodeBody(t, r)
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "id: ev-1\nretry: 300\ndata:\n\n")
			postDone = time.Now()
		case http.MethodGet:
			getAt.Store(int64(time.Since(postDone)))
			lastEventID.Store(r.Header.Get("Last-Event-Id"))
			sse(w, eventstream.Event{ID: "ev-2", Data: []byte(result(protocol.Int64ID(9), `{"resumed":true}`))})
		}
	}))
	defer srv.Close()
	c, rec := dial(t, srv.URL, Options{})

	require.NoError(t, c.Send(testwait.Context(t), request(9, "tools/call", `{"name":"slow"}`)))
	require.Len(t, rec.Frames(), 1)
	assert.Contains(t, rec.Frames()[0], `"resumed":true`)
	assert.Equal(t, "ev-1", lastEventID.Load())
	assert.GreaterOrEqual(t, time.Duration(getAt.Load()), 250*time.Millisecond, "the server's retry delay is honoured")
}

func TestBrokenStreamWithoutEventIDFailsTheRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		decodeBody(t, r)
		sse(w, eventstream.Event{Data: []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)})
	}))
	defer srv.Close()
	c, _ := dial(t, srv.URL, Options{})
	err := c.Send(testwait.Context(t), request(1, "tools/call", `{"name":"x"}`))
	assert.ErrorIs(t, err, transports.ErrStreamBroken)
	assert.Equal(t, transports.ClassReset, transports.Classify(err))
}

func TestResumptionGivesUpAfterMaxResumes(t *testing.T) {
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK) // and end at once, with nothing
			return
		}
		decodeBody(t, r)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: 1\nretry: 10\ndata:\n\n")
	}))
	defer srv.Close()
	c, _ := dial(t, srv.URL, Options{MaxResumes: 2})
	err := c.Send(testwait.Context(t), request(1, "tools/call", `{"name":"x"}`))
	assert.ErrorIs(t, err, transports.ErrStreamBroken)
	assert.EqualValues(t, 2, gets.Load())
}

func TestOversizeAnswerIsDroppedAndReported(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := decodeBody(t, r)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, result(m.ID, `"`+strings.Repeat("x", 5000)+`"`))
	}))
	defer srv.Close()
	c, rec := dial(t, srv.URL, Options{MaxFrameSize: 1024})
	require.NoError(t, c.Send(testwait.Context(t), request(1, "tools/call", `{"name":"x"}`)))
	assert.Empty(t, rec.Frames())
	errs := rec.FrameErrors()
	require.Len(t, errs, 1)
	var tooBig *transports.FrameTooLargeError
	require.ErrorAs(t, errs[0], &tooBig)
	assert.EqualValues(t, 1024, tooBig.Limit)
	assert.Contains(t, string(tooBig.Prefix), `"id":1`)
}

// The standalone GET stream carries server notifications; a server that
// does not offer it (405) costs nothing and the POST channel works on.
func TestStandaloneGetStream(t *testing.T) {
	for _, offered := range []bool{true, false} {
		t.Run(fmt.Sprintf("offered=%v", offered), func(t *testing.T) {
			var gets atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					gets.Add(1)
					if !offered {
						w.WriteHeader(http.StatusMethodNotAllowed)
						return
					}
					sse(w, eventstream.Event{ID: "g1", Data: []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)})
					<-r.Context().Done()
					return
				}
				if r.Method == http.MethodDelete {
					return
				}
				m := decodeBody(t, r)
				if m.Method == "initialize" {
					w.Header().Set("Mcp-Session-Id", "s")
				}
				if m.Kind != protocol.KindRequest {
					w.WriteHeader(http.StatusAccepted)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, result(m.ID, `{}`))
			}))
			defer srv.Close()
			c, rec := dial(t, srv.URL, Options{})
			require.NoError(t, c.Send(testwait.Context(t), request(1, "initialize", "")))
			c.SetProtocolVersion(protocol.Version20250618)
			require.NoError(t, c.Send(testwait.Context(t), []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)))
			if offered {
				require.Eventually(t, func() bool {
					frames := rec.Frames()
					return len(frames) == 2 && strings.Contains(frames[1], "list_changed")
				}, 5*time.Second, 5*time.Millisecond, "the notification arrives on the GET stream")
			} else {
				require.Eventually(t, func() bool { return gets.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
			}
			require.NoError(t, c.Send(testwait.Context(t), request(2, "tools/list", "")))
			time.Sleep(50 * time.Millisecond) // testwait:ok a check that nothing happens within a while
			assert.EqualValues(t, 1, gets.Load(), "a refused GET is not retried; an open one is not reopened")
			require.NoError(t, c.Close(testwait.Context(t)))
		})
	}
}

func TestGetStreamIsReopenedAfterItDropsAndGivenUpAfterRepeatedFailures(t *testing.T) {
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		m := decodeBody(t, r)
		if m.Kind != protocol.KindRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, result(m.ID, `{}`))
	}))
	defer srv.Close()
	c, _ := dial(t, srv.URL, Options{DefaultRetry: time.Millisecond, GetStreamAttempts: 3})
	require.NoError(t, c.Send(testwait.Context(t), []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)))
	require.Eventually(t, func() bool { return gets.Load() == 4 }, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond) // testwait:ok a check that nothing happens within a while
	assert.EqualValues(t, 4, gets.Load(), "one attempt and three retries, then it gives up")
	require.NoError(t, c.Send(testwait.Context(t), request(1, "tools/list", "")), "the POST channel is unaffected")
}

func TestCloseDeletesTheSessionAndEndsInFlightRequests(t *testing.T) {
	deleted := make(chan string, 1)
	hanging := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodDelete:
			deleted <- r.Header.Get("Mcp-Session-Id")
			return
		case http.MethodGet:
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		m := decodeBody(t, r)
		if m.Method == "initialize" {
			w.Header().Set("Mcp-Session-Id", "bye")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, result(m.ID, `{}`))
			return
		}
		sse(w) // a stream that never answers
		if m.Method == "tools/call" {
			select {
			case hanging <- struct{}{}:
			default:
			}
		}
		<-r.Context().Done()
	}))
	defer srv.Close()
	c, rec := dial(t, srv.URL, Options{})
	require.NoError(t, c.Send(testwait.Context(t), request(1, "initialize", "")))

	sent := make(chan error, 1)
	go func() { sent <- c.Send(testwait.Context(t), request(2, "tools/call", `{"name":"hang"}`)) }()
	testwait.Recv(t, hanging, "the tools/call to reach the server")
	require.NoError(t, c.Close(testwait.Context(t)))
	assert.Equal(t, "bye", testwait.Recv(t, deleted, "the DELETE of the session"))
	select {
	case err := <-sent:
		assert.ErrorIs(t, err, transports.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("the in-flight request outlived Close")
	}
	testwait.Done(t, rec.closedOnce, "the receiver told of the connection's end")
	assert.ErrorIs(t, rec.closed, transports.ErrClosed)
	require.NoError(t, c.Close(testwait.Context(t)), "Close is idempotent")
	assert.Equal(t, 1, rec.closedN)
}

func TestDeleteIsBoundedInTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			<-r.Context().Done() // a server that never answers DELETE
			return
		}
		m := decodeBody(t, r)
		w.Header().Set("Mcp-Session-Id", "s")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, result(m.ID, `{}`))
	}))
	defer srv.Close()
	c, _ := dial(t, srv.URL, Options{DeleteTimeout: 100 * time.Millisecond})
	require.NoError(t, c.Send(testwait.Context(t), request(1, "initialize", "")))
	start := time.Now()
	require.NoError(t, c.Close(testwait.Context(t)))
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestCallerContextEndsTheRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		decodeBody(t, r)
		<-r.Context().Done() // slow first byte, forever
	}))
	defer srv.Close()
	c, _ := dial(t, srv.URL, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := c.Send(ctx, request(1, "tools/call", `{"name":"x"}`))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestConnectionErrorsAreClassified(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	c, _ := dial(t, url, Options{})
	err := c.Send(testwait.Context(t), request(1, "initialize", ""))
	require.Error(t, err)
	assert.Equal(t, transports.ClassRefused, transports.Classify(err), err.Error())

	_, err = Dial(testwait.Context(t), transports.Config{URL: "ftp://example.com"}, Options{}, newRecorder())
	var cfgErr *transports.ConfigError
	assert.ErrorAs(t, err, &cfgErr)
	assert.Equal(t, transports.ClassConfig, transports.Classify(err))
}

func TestInvalidFramesAreRefusedBeforeSending(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { posts.Add(1) }))
	defer srv.Close()
	c, _ := dial(t, srv.URL, Options{})
	assert.Error(t, c.Send(testwait.Context(t), []byte(`{"jsonrpc":`)))
	assert.Zero(t, posts.Load())
}

func TestSecretsAreNotInErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad", http.StatusInternalServerError)
	}))
	defer srv.Close()
	c, _ := dial(t, srv.URL, Options{})
	err := c.Send(testwait.Context(t), request(1, "initialize", ""))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "secret")
	b, _ := json.Marshal(err)
	assert.NotContains(t, string(b), "secret")
	assert.False(t, errors.Is(err, transports.ErrClosed))
}

// A server sends requests that are not answers (elicitation, sampling) on
// the GET stream and drops them while it is not open: the initialized
// notification returns only once the GET stream has been answered.
func TestInitializedWaitsForTheGetStream(t *testing.T) {
	var answerGets atomic.Bool
	getAnswered := make(chan struct{}, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			if !answerGets.Load() {
				<-r.Context().Done() // a GET stream that never opens
				return
			}
			time.Sleep(50 * time.Millisecond)
			getAnswered <- struct{}{}
			sse(w)
			<-r.Context().Done()
		case http.MethodPost:
			decodeBody(t, r)
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer srv.Close()
	initialized := []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	answerGets.Store(true)
	// A bound far beyond the server's delay: the wait must end with the
	// answer, however slow the machine.
	c, _ := dial(t, srv.URL, Options{GetStreamWait: testwait.Patience})
	require.NoError(t, c.Send(testwait.Context(t), initialized))
	select {
	case <-getAnswered:
	default:
		t.Fatal("Send returned before the GET stream was answered")
	}
	require.NoError(t, c.Close(testwait.Context(t)))

	answerGets.Store(false)
	c2, _ := dial(t, srv.URL, Options{GetStreamWait: 20 * time.Millisecond})
	sent := make(chan error, 1)
	go func() { sent <- c2.Send(testwait.Context(t), initialized) }()
	select {
	case err := <-sent:
		require.NoError(t, err, "the wait for a GET stream that never opens is bounded")
	case <-time.After(10 * time.Second):
		t.Fatal("Send waits for a GET stream that never opens")
	}
	require.NoError(t, c2.Close(testwait.Context(t)))
}

// A server that restarts forgets its sessions: the GET stream that was
// open is refused on reopening, and the connection ends at once with
// ErrSessionExpired instead of looking healthy until the next call.
func TestRefusedReopenOfTheGetStreamMeansTheSessionExpired(t *testing.T) {
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			if gets.Add(1) > 1 {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
			sse(w) // open, then end: the server went away
		case http.MethodPost:
			m := decodeBody(t, r)
			if m.Method == "initialize" {
				w.Header().Set("Mcp-Session-Id", "s1")
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, result(m.ID, `{}`))
				return
			}
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer srv.Close()
	c, rec := dial(t, srv.URL, Options{DefaultRetry: 10 * time.Millisecond})
	require.NoError(t, c.Send(testwait.Context(t), request(1, "initialize", "")))
	require.NoError(t, c.Send(testwait.Context(t), []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)))
	select {
	case <-rec.closedOnce:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection outlived its session")
	}
	assert.ErrorIs(t, rec.closed, transports.ErrSessionExpired)
}
