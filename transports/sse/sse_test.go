package sse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// posted is one POST the test server received.
type posted struct {
	Header http.Header
	Body   string
	URL    string
}

// legacyServer is a scripted HTTP+SSE server: GET /sse opens the stream
// and sends the endpoint event, then whatever the test pushes; POSTs to
// /messages are recorded, answered with postStatus, and echoed on the
// stream.
type legacyServer struct {
	*httptest.Server
	endpoint       string        // the endpoint event's data
	events         chan string   // raw event text to send on the stream
	endStream      chan struct{} // closed: the GET handler returns
	postStatus     atomic.Int32  // 0 means 202
	postHold       chan struct{} // if set, POST handlers wait for it (or the request's end)
	cancelledPosts atomic.Int32  // POSTs whose request ended while held
	noEcho         bool

	mu       sync.Mutex
	getHdrs  []http.Header
	posts    []posted
	getEnded chan struct{} // closed when a GET handler returned
}

func newLegacyServer(t *testing.T, configure ...func(*legacyServer)) *legacyServer {
	s := &legacyServer{
		endpoint:  "/messages?sessionId=s3cret-session",
		events:    make(chan string, 100),
		endStream: make(chan struct{}),
		getEnded:  make(chan struct{}),
	}
	for _, f := range configure {
		f(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sse", s.stream)
	mux.HandleFunc("POST /messages", s.message)
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func (s *legacyServer) stream(w http.ResponseWriter, r *http.Request) {
	defer close(s.getEnded)
	s.mu.Lock()
	s.getHdrs = append(s.getHdrs, r.Header.Clone())
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	s.mu.Lock()
	endpoint := s.endpoint
	s.mu.Unlock()
	fmt.Fprintf(w, ": hello\n\nevent: endpoint\ndata: %s\n\n", endpoint)
	w.(http.Flusher).Flush()
	for {
		select {
		case ev := <-s.events:
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		case <-s.endStream:
			return
		case <-r.Context().Done():
			return
		}
	}
}

func (s *legacyServer) message(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.posts = append(s.posts, posted{Header: r.Header.Clone(), Body: string(body), URL: r.URL.String()})
	s.mu.Unlock()
	if s.postHold != nil {
		select {
		case <-s.postHold:
		case <-r.Context().Done():
			s.cancelledPosts.Add(1)
			return
		}
	}
	status := int(s.postStatus.Load())
	if status == 0 {
		status = http.StatusAccepted
	}
	w.WriteHeader(status)
	io.WriteString(w, "Accepted")
	if status/100 == 2 && !s.noEcho {
		s.events <- "event: message\ndata: " + string(body) + "\n\n"
	}
}

func (s *legacyServer) config() transports.Config {
	return transports.Config{
		Type:    transports.TypeSSE,
		URL:     s.URL + "/sse",
		Headers: map[string]string{"Authorization": "Bearer t0ken-value", "X-Tenant": "acme"},
	}
}

func dial(t *testing.T, cfg transports.Config, opts Options) (*Conn, *transporttest.Recorder) {
	t.Helper()
	rec := transporttest.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, cfg, opts, rec)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c, rec
}

func TestFramesRoundTrip(t *testing.T) {
	s := newLegacyServer(t)
	c, rec := dial(t, s.config(), Options{UserAgent: "mcpvisor-test"})
	ctx := testwait.Context(t)
	for i := range 3 {
		require.NoError(t, c.Send(ctx, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)))
	}
	frames, _ := rec.Wait(t, 3)
	assert.Equal(t, []string{
		`{"jsonrpc":"2.0","id":0,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping"}`,
	}, frames)

	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.getHdrs, 1)
	get := s.getHdrs[0]
	assert.Equal(t, "text/event-stream", get.Get("Accept"))
	assert.Equal(t, "Bearer t0ken-value", get.Get("Authorization"))
	assert.Equal(t, "acme", get.Get("X-Tenant"))
	assert.Equal(t, "mcpvisor-test", get.Get("User-Agent"))
	require.Len(t, s.posts, 3)
	for _, p := range s.posts {
		assert.Equal(t, "/messages?sessionId=s3cret-session", p.URL)
		assert.Equal(t, "application/json", p.Header.Get("Content-Type"))
		assert.Equal(t, "Bearer t0ken-value", p.Header.Get("Authorization"))
		assert.Equal(t, "acme", p.Header.Get("X-Tenant"))
		assert.Equal(t, "mcpvisor-test", p.Header.Get("User-Agent"))
	}
}

func TestConcurrentSends(t *testing.T) {
	s := newLegacyServer(t, func(s *legacyServer) { s.events = make(chan string, 1000) })
	c, rec := dial(t, s.config(), Options{})
	transporttest.SendsDoNotInterleave(t, c, rec, 10, 20, 100)
}

func TestTheEndpointIsResolvedAgainstTheURL(t *testing.T) {
	tests := []struct {
		name, endpoint, wantPath string
	}{
		{"absolute path", "/messages?sessionId=1", "/messages?sessionId=1"},
		{"relative path", "messages?sessionId=2", "/messages?sessionId=2"},
		{"with spaces around", "  /messages?sessionId=3 \t", "/messages?sessionId=3"},
		{"absolute URL on the same origin", "{{origin}}/messages?sessionId=4", "/messages?sessionId=4"},
		{"a fragment is dropped", "/messages?sessionId=5#frag", "/messages?sessionId=5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newLegacyServer(t)
			s.mu.Lock() // the server's address is known only now
			s.endpoint = strings.ReplaceAll(tt.endpoint, "{{origin}}", s.URL)
			s.mu.Unlock()
			c, rec := dial(t, s.config(), Options{})
			require.NoError(t, c.Send(testwait.Context(t), []byte(`{"x":1}`)))
			rec.Wait(t, 1)
			s.mu.Lock()
			defer s.mu.Unlock()
			assert.Equal(t, tt.wantPath, s.posts[0].URL)
		})
	}
}

func TestAnEndpointOnAnotherOriginIsRefused(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()

	tests := []struct{ name, endpoint string }{
		{"another host", "http://evil.example/messages"},
		{"another port", other.URL + "/messages"},
		{"scheme-relative to another host", "//evil.example:8080/messages"},
		{"another scheme", "https://127.0.0.1/messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newLegacyServer(t, func(s *legacyServer) { s.endpoint = tt.endpoint })
			_, err := Dial(testwait.Context(t), s.config(), Options{}, transporttest.NewRecorder())
			require.Error(t, err)
			var oe *OriginError
			require.ErrorAs(t, err, &oe)
			var ce *transports.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, transports.ClassConfig, transports.Classify(err))
			assert.Equal(t, "http://127.0.0.1:"+strings.Split(s.URL, ":")[2], oe.Server)
			assert.NotContains(t, err.Error(), "t0ken-value")
			select {
			case <-s.getEnded:
			case <-time.After(5 * time.Second):
				t.Fatal("the refused stream was not closed")
			}
		})
	}
	assert.Zero(t, elsewhere.Load(), "nothing was sent to the other origin")
}

func TestTheDefaultPortIsTheSameOrigin(t *testing.T) {
	base := mustParse(t, "http://Example.com/sse")
	ep, err := resolveEndpoint(base, "http://example.COM:80/messages")
	require.NoError(t, err)
	assert.Equal(t, "http://example.COM:80/messages", ep.String())
	_, err = resolveEndpoint(mustParse(t, "https://example.com/sse"), "https://example.com:443/m")
	assert.NoError(t, err)
	_, err = resolveEndpoint(mustParse(t, "https://example.com/sse"), "https://example.com:8443/m")
	assert.Error(t, err)
	_, err = resolveEndpoint(mustParse(t, "http://[::1]:9/sse"), "/m")
	assert.NoError(t, err)
	_, err = resolveEndpoint(base, "http://%zz")
	assert.Error(t, err, "an unparsable endpoint")
}

func TestDialWaitsForTheEndpointBoundedByEndpointTimeout(t *testing.T) {
	noEndpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: {\"early\":1}\n\n: ping\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer noEndpoint.Close()

	rec := transporttest.NewRecorder()
	start := time.Now()
	_, err := Dial(testwait.Context(t), transports.Config{URL: noEndpoint.URL}, Options{EndpointTimeout: 100 * time.Millisecond}, rec)
	require.Error(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, transports.ClassTimeout, transports.Classify(err))
	assert.Contains(t, err.Error(), "no endpoint event within 100ms")
	assert.False(t, rec.IsClosed(), "a failed Dial calls no Receiver method")
	assert.Empty(t, rec.Frames(), "events before the endpoint are dropped")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = Dial(ctx, transports.Config{URL: noEndpoint.URL}, Options{}, rec)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, transports.ClassTimeout, transports.Classify(err))

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = Dial(ctx, transports.Config{URL: noEndpoint.URL}, Options{}, rec)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, transports.ClassCanceled, transports.Classify(err))
}

func TestTheStreamOutlivesDialsContext(t *testing.T) {
	s := newLegacyServer(t)
	// A dial on a loaded machine may itself wait longer than the short
	// EndpointTimeout for the endpoint event, and fail as it should (1 run
	// in 20 of make flake's race row); that is not what this test is
	// about: dial again until one succeeds, then check that the stream
	// outlives both the dial's context and its EndpointTimeout.
	var c *Conn
	var rec *transporttest.Recorder
	for deadline := time.Now().Add(testwait.Patience); c == nil; {
		ctx, cancel := context.WithCancel(context.Background())
		rec = transporttest.NewRecorder()
		var err error
		c, err = Dial(ctx, s.config(), Options{EndpointTimeout: 50 * time.Millisecond}, rec)
		cancel()
		if err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded, "only the endpoint's deadline may fail the dial")
			require.True(t, time.Now().Before(deadline), "no dial got its endpoint event within 50 ms in %v", testwait.Patience)
		}
	}
	defer c.Close(testwait.Context(t))
	time.Sleep(100 * time.Millisecond) // testwait:ok not a wait: past EndpointTimeout too
	require.NoError(t, c.Send(testwait.Context(t), []byte(`{"still":"up"}`)))
	rec.Wait(t, 1)
	rec.AssertOpen(t)
}

func TestDialReportsTheGETsStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="https://x/.well-known"`)
		http.Error(w, "no token", http.StatusUnauthorized)
	}))
	defer srv.Close()
	_, err := Dial(testwait.Context(t), transports.Config{URL: srv.URL}, Options{}, transporttest.NewRecorder())
	var herr *transports.HTTPStatusError
	require.ErrorAs(t, err, &herr)
	assert.Equal(t, http.StatusUnauthorized, herr.StatusCode)
	assert.Equal(t, http.MethodGet, herr.Method)
	assert.Contains(t, herr.WWWAuthenticate, "resource_metadata")
	assert.Equal(t, transports.ClassAuth, transports.Classify(err))
}

func TestDialRefusesAResponseThatIsNotAnEventStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	_, err := Dial(testwait.Context(t), transports.Config{URL: srv.URL}, Options{}, transporttest.NewRecorder())
	var ce *transports.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "not an event stream")
}

func TestDialRefusesABadURL(t *testing.T) {
	for _, u := range []string{"ftp://example.com/sse", "/relative", "ws://example.com/"} {
		_, err := Dial(testwait.Context(t), transports.Config{URL: u}, Options{}, transporttest.NewRecorder())
		assert.Equal(t, transports.ClassConfig, transports.Classify(err), u)
	}
}

func TestDialReportsAStreamThatEndsBeforeTheEndpoint(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": bye\n\n")
	}))
	defer srv.Close()
	_, err := Dial(testwait.Context(t), transports.Config{URL: srv.URL}, Options{}, transporttest.NewRecorder())
	assert.ErrorIs(t, err, transports.ErrClosed)
	assert.Equal(t, transports.ClassClosed, transports.Classify(err))
}

func TestDialReportsARefusedConnectionWithoutTheURLsQuery(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	_, err = Dial(testwait.Context(t), transports.Config{URL: "http://" + addr + "/sse?token=s3cret"}, Options{}, transporttest.NewRecorder())
	require.Error(t, err)
	assert.Equal(t, transports.ClassRefused, transports.Classify(err))
	assert.NotContains(t, err.Error(), "s3cret")
	assert.Contains(t, err.Error(), addr+"/sse")
}

func TestOnlyMessageEventsAreFrames(t *testing.T) {
	s := newLegacyServer(t)
	_, rec := dial(t, s.config(), Options{})
	s.events <- "data: {\"n\":1}\n\n"
	s.events <- "event: message\ndata: {\"n\":2}\n\n"
	s.events <- "event: ping\ndata: {\"ignored\":true}\n\n"
	s.events <- "event: endpoint\ndata: /elsewhere\n\n"
	s.events <- "data:\n\n"
	s.events <- ": comment\n\n"
	s.events <- "data: {\"n\":\ndata: 3}\n\n"
	frames, errs := rec.Wait(t, 3)
	assert.Equal(t, []string{`{"n":1}`, `{"n":2}`, "{\"n\":\n3}"}, frames)
	assert.Empty(t, errs)
}

func TestAnOversizeEventIsReportedAndTheStreamGoesOn(t *testing.T) {
	s := newLegacyServer(t)
	_, rec := dial(t, s.config(), Options{MaxFrameSize: 100})
	big := `{"jsonrpc":"2.0","id":9,"result":"` + strings.Repeat("z", 500) + `"}`
	s.events <- "data: " + big + "\n\n"
	s.events <- "data: {\"small\":1}\n\n"
	frames, errs := rec.Wait(t, 2)
	assert.Equal(t, []string{`{"small":1}`}, frames)
	require.Len(t, errs, 1)
	var tl *transports.FrameTooLargeError
	require.ErrorAs(t, errs[0], &tl)
	assert.EqualValues(t, 100, tl.Limit)
	assert.EqualValues(t, len(big), tl.Size)
	assert.Equal(t, big, string(tl.Prefix))
	rec.AssertOpen(t)
}

func TestPOSTStatuses(t *testing.T) {
	tests := []struct {
		status    int
		wantErr   bool
		class     transports.Class
		endsConn  bool
		isExpired bool
	}{
		{status: 200},
		{status: 201},
		{status: 202},
		{status: 204},
		{status: 400, wantErr: true, class: transports.ClassHTTP4xx},
		{status: 401, wantErr: true, class: transports.ClassAuth},
		{status: 403, wantErr: true, class: transports.ClassAuth},
		{status: 429, wantErr: true, class: transports.ClassHTTP5xx},
		{status: 500, wantErr: true, class: transports.ClassHTTP5xx},
		{status: 503, wantErr: true, class: transports.ClassHTTP5xx},
		{status: 404, wantErr: true, class: transports.ClassSessionExpired, endsConn: true, isExpired: true},
		{status: 410, wantErr: true, class: transports.ClassSessionExpired, endsConn: true, isExpired: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			s := newLegacyServer(t, func(s *legacyServer) { s.noEcho = true })
			s.postStatus.Store(int32(tt.status))
			c, rec := dial(t, s.config(), Options{})
			err := c.Send(testwait.Context(t), []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			if !tt.wantErr {
				require.NoError(t, err)
				rec.AssertOpen(t)
				return
			}
			var herr *transports.HTTPStatusError
			require.ErrorAs(t, err, &herr)
			assert.Equal(t, tt.status, herr.StatusCode)
			assert.Equal(t, http.MethodPost, herr.Method)
			assert.Equal(t, tt.class, transports.Classify(err))
			assert.Equal(t, tt.isExpired, errors.Is(err, transports.ErrSessionExpired))
			if !tt.endsConn {
				rec.AssertOpen(t)
				s.postStatus.Store(202)
				assert.NoError(t, c.Send(testwait.Context(t), []byte(`{}`)), "the connection stays up")
				return
			}
			cause := rec.WaitClosed(t)
			assert.Equal(t, err, cause, "Closed reports the same error")
			assert.Equal(t, transports.ClassSessionExpired, transports.Classify(cause))
			err = c.Send(testwait.Context(t), []byte(`{}`))
			assert.ErrorIs(t, err, transports.ErrClosed)
			assert.ErrorIs(t, err, transports.ErrSessionExpired)
		})
	}
}

func TestSendHonoursItsContext(t *testing.T) {
	hold := make(chan struct{})
	s := newLegacyServer(t, func(s *legacyServer) { s.postHold = hold })
	c, rec := dial(t, s.config(), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := c.Send(ctx, []byte(`{"slow":1}`))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, transports.ErrClosed)
	rec.AssertOpen(t)
	require.Eventually(t, func() bool { return s.cancelledPosts.Load() == 1 }, 5*time.Second, time.Millisecond,
		"the server saw the POST cancelled")

	close(hold)
	require.NoError(t, c.Send(testwait.Context(t), []byte(`{"fast":2}`)))
	frames, _ := rec.Wait(t, 1)
	assert.Equal(t, []string{`{"fast":2}`}, frames)
}

func TestTheServerEndingTheStreamIsAClosedConnection(t *testing.T) {
	s := newLegacyServer(t)
	c, rec := dial(t, s.config(), Options{})
	s.events <- "data: {\"last\":1}\n\n"
	rec.Wait(t, 1)
	close(s.endStream)
	err := rec.WaitClosed(t)
	assert.ErrorIs(t, err, transports.ErrClosed)
	assert.Equal(t, transports.ClassClosed, transports.Classify(err))
	frames, _ := rec.Wait(t, 1)
	assert.Equal(t, []string{`{"last":1}`}, frames)
	assert.ErrorIs(t, c.Send(testwait.Context(t), []byte(`{}`)), transports.ErrClosed, "the connection is over")
}

// brokenServer serves an event stream over a hijacked connection and, when
// told, drops the connection: with an RST when reset is true, else with a
// plain close in the middle of a chunk.
func brokenServer(t *testing.T, reset bool) (*httptest.Server, chan struct{}) {
	drop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		conn, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		chunk := func(s string) { fmt.Fprintf(bw, "%x\r\n%s\r\n", len(s), s); bw.Flush() }
		io.WriteString(bw, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		chunk("event: endpoint\ndata: /messages\n\n")
		<-drop
		if reset {
			conn.(*net.TCPConn).SetLinger(0)
			return
		}
		io.WriteString(bw, "40\r\ndata: {\"cut")
		bw.Flush()
	}))
	t.Cleanup(srv.Close)
	return srv, drop
}

func TestABrokenStreamIsAResetConnection(t *testing.T) {
	for _, reset := range []bool{true, false} {
		t.Run(fmt.Sprintf("rst=%v", reset), func(t *testing.T) {
			srv, drop := brokenServer(t, reset)
			_, rec := dial(t, transports.Config{URL: srv.URL}, Options{})
			close(drop)
			err := rec.WaitClosed(t)
			assert.Equal(t, transports.ClassReset, transports.Classify(err), "%v", err)
			assert.NotErrorIs(t, err, transports.ErrClosed)
		})
	}
}

func TestCloseEndsTheStream(t *testing.T) {
	s := newLegacyServer(t)
	c, rec := dial(t, s.config(), Options{})
	require.NoError(t, c.Close(testwait.Context(t)))
	assert.Equal(t, transports.ErrClosed, rec.WaitClosed(t))
	select {
	case <-s.getEnded:
	case <-time.After(5 * time.Second):
		t.Fatal("the server's stream did not end")
	}
	assert.NoError(t, c.Close(testwait.Context(t)), "Close is idempotent")
	assert.ErrorIs(t, c.Send(testwait.Context(t), []byte(`{}`)), transports.ErrClosed)
}

func TestCloseIsSafeConcurrentlyWithSendsAndItself(t *testing.T) {
	s := newLegacyServer(t, func(s *legacyServer) { s.events = make(chan string, 10000) })
	c, rec := dial(t, s.config(), Options{})
	transporttest.CloseIsSafeConcurrently(t, c, rec, 20)
}

func TestCloseCancelsSendsInFlight(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	s := newLegacyServer(t, func(s *legacyServer) { s.postHold = hold })
	c, rec := dial(t, s.config(), Options{})
	sent := make(chan error, 1)
	go func() { sent <- c.Send(testwait.Context(t), []byte(`{"stuck":1}`)) }()
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.posts) == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, c.Close(testwait.Context(t)))
	select {
	case err := <-sent:
		assert.ErrorIs(t, err, transports.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("the send was not cancelled")
	}
	rec.WaitClosed(t)
}

func TestCloseIsBoundedByItsContext(t *testing.T) {
	s := newLegacyServer(t)
	rec := transporttest.NewRecorder()
	rec.Block = make(chan struct{})
	c, err := Dial(testwait.Context(t), s.config(), Options{}, rec)
	require.NoError(t, err)
	s.events <- "data: {}\n\n" // the receiver blocks on it
	rec.WaitBlocked(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = c.Close(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	close(rec.Block)
	rec.WaitClosed(t)
	assert.NoError(t, c.Close(testwait.Context(t)))
}

func TestSecretsStayOutOfLogsAndErrors(t *testing.T) {
	var logs bytes.Buffer
	log := zerolog.New(&logs).Level(zerolog.DebugLevel)
	s := newLegacyServer(t, func(s *legacyServer) { s.noEcho = true })
	c, rec := dial(t, s.config(), Options{Logger: log})
	s.events <- "event: custom\ndata: x\n\n"
	s.events <- "data: {}\n\n"
	rec.Wait(t, 1)
	s.postStatus.Store(500)
	err := c.Send(testwait.Context(t), []byte(`{}`))
	require.Error(t, err)
	s.postStatus.Store(404)
	err2 := c.Send(testwait.Context(t), []byte(`{}`))
	require.Error(t, err2)
	require.NoError(t, c.Close(testwait.Context(t)))
	out := logs.String() + err.Error() + err2.Error() + rec.WaitClosed(t).Error()
	assert.Contains(t, logs.String(), "/messages", "the endpoint's path is logged")
	for _, secret := range []string{"t0ken-value", "s3cret-session"} {
		assert.NotContains(t, out, secret)
	}
}

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestAPOSTsNetworkErrorIsReturnedAndTheConnectionStaysUp(t *testing.T) {
	s := newLegacyServer(t)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	var failPosts atomic.Bool
	failPosts.Store(true)
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost && failPosts.Load() {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		}
		return tr.RoundTrip(r)
	})}
	c, rec := dial(t, s.config(), Options{Client: client})
	err := c.Send(testwait.Context(t), []byte(`{}`))
	require.Error(t, err)
	assert.Equal(t, transports.ClassRefused, transports.Classify(err))
	assert.Contains(t, err.Error(), "POST")
	assert.NotContains(t, err.Error(), "s3cret-session", "the endpoint's query stays out of errors")
	rec.AssertOpen(t)

	failPosts.Store(false)
	require.NoError(t, c.Send(testwait.Context(t), []byte(`{"ok":1}`)))
	rec.Wait(t, 1)
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}
