package httpclient

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// connServer is a loopback HTTP server that counts the connections it
// accepted and closed.
type connServer struct {
	*httptest.Server
	opened, closed atomic.Int64
}

func newConnServer(t *testing.T, h http.HandlerFunc, configure ...func(*http.Server)) *connServer {
	t.Helper()
	s := &connServer{}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closed.Add(1)
		}
	}
	for _, f := range configure {
		f(s.Config)
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func newClient(t *testing.T, opts Options) *http.Client {
	t.Helper()
	c, err := New(transports.Config{Type: transports.TypeHTTP}, opts)
	require.NoError(t, err)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// get does one request and returns the body read to its end.
func get(ctx context.Context, c *http.Client, method, u string) (string, error) {
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func echoMethod(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	io.WriteString(w, r.Method)
}

func TestSequentialRequestsShareOneConnection(t *testing.T) {
	srv := newConnServer(t, echoMethod)
	c := newClient(t, Options{})
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodPost, http.MethodDelete} {
		got, err := get(testwait.Context(t), c, m, srv.URL)
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
	assert.EqualValues(t, 1, srv.opened.Load())
}

func TestConnectionCloseIsNotReused(t *testing.T) {
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		echoMethod(w, r)
	})
	c := newClient(t, Options{})
	for range 3 {
		_, err := get(testwait.Context(t), c, http.MethodPost, srv.URL)
		require.NoError(t, err)
	}
	assert.EqualValues(t, 3, srv.opened.Load())
}

func TestConnectionTheServerClosedWhileIdleIsReplaced(t *testing.T) {
	srv := newConnServer(t, echoMethod, func(s *http.Server) { s.IdleTimeout = 20 * time.Millisecond })
	c := newClient(t, Options{})
	_, err := get(testwait.Context(t), c, http.MethodPost, srv.URL)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return srv.closed.Load() == 1 }, 5*time.Second, 5*time.Millisecond,
		"the server closes the idle connection")

	got, err := get(testwait.Context(t), c, http.MethodPost, srv.URL)
	require.NoError(t, err, "the closed connection is not used for the POST")
	assert.Equal(t, http.MethodPost, got)
	assert.EqualValues(t, 2, srv.opened.Load())
}

func TestChunkedBodyIsReadWholeAndTheConnectionReused(t *testing.T) {
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			io.WriteString(w, strings.Repeat(string(rune('a'+i)), 5000))
			w.(http.Flusher).Flush()
		}
	})
	c := newClient(t, Options{})
	for range 2 {
		got, err := get(testwait.Context(t), c, http.MethodGet, srv.URL)
		require.NoError(t, err)
		assert.Equal(t, strings.Repeat("a", 5000)+strings.Repeat("b", 5000)+strings.Repeat("c", 5000), got)
	}
	assert.EqualValues(t, 1, srv.opened.Load())
}

func TestInformationalResponsesAreSkipped(t *testing.T) {
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "final")
	})
	c := newClient(t, Options{})
	req, err := http.NewRequestWithContext(testwait.Context(t), http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Equal(t, "final", string(b))
}

// blockingServer answers only once release is closed; started says a
// request arrived. With headersFirst it sends the headers at once and
// holds the body.
func blockingServer(t *testing.T, headersFirst bool) (srv *connServer, started <-chan struct{}, release chan struct{}) {
	st := make(chan struct{}, 16)
	release = make(chan struct{})
	srv = newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		if headersFirst {
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "first")
			w.(http.Flusher).Flush()
		}
		st <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return srv, st, release
}

func TestCancelWhileWaitingForHeadersEndsTheCall(t *testing.T) {
	srv, started, _ := blockingServer(t, false)
	c := newClient(t, Options{})
	ctx, cancel := context.WithCancel(testwait.Context(t))
	go func() {
		select {
		case <-started:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err := get(ctx, c, http.MethodPost, srv.URL)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, transports.ClassCanceled, transports.Classify(err))
}

func TestCancelWhileReadingTheBodyEndsTheRead(t *testing.T) {
	srv, started, _ := blockingServer(t, true)
	c := newClient(t, Options{})
	ctx, cancel := context.WithCancel(testwait.Context(t))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	testwait.Done(t, started, "the server to start answering")
	buf := make([]byte, 5)
	_, err = io.ReadFull(resp.Body, buf)
	require.NoError(t, err)
	assert.Equal(t, "first", string(buf))

	cancel()
	_, err = resp.Body.Read(buf)
	require.ErrorIs(t, err, context.Canceled)
}

func TestCloseFromAnotherGoroutineEndsABlockedRead(t *testing.T) {
	srv, started, release := blockingServer(t, true)
	c := newClient(t, Options{})
	req, err := http.NewRequestWithContext(testwait.Context(t), http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	testwait.Done(t, started, "the server to start answering")

	readErr := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		readErr <- err
	}()
	time.Sleep(20 * time.Millisecond) // testwait:ok not a wait: either order ends the read with ErrBodyReadAfterClose; the pause makes a blocked read the likely case
	require.NoError(t, resp.Body.Close())
	require.ErrorIs(t, testwait.Recv(t, readErr, "the blocked read to end at Close"), http.ErrBodyReadAfterClose)

	close(release)
	_, err = get(testwait.Context(t), c, http.MethodGet, srv.URL)
	require.NoError(t, err)
	assert.EqualValues(t, 2, srv.opened.Load(), "a body closed early does not give its connection back")
}

func TestResponseHeaderTimeoutIsATimeout(t *testing.T) {
	srv, _, _ := blockingServer(t, false)
	c := newClient(t, Options{ResponseHeaderTimeout: 50 * time.Millisecond})
	_, err := get(testwait.Context(t), c, http.MethodPost, srv.URL)
	require.Error(t, err)
	assert.Equal(t, transports.ClassTimeout, transports.Classify(err))
	assert.Contains(t, err.Error(), "no response headers within 50ms")
}

func TestResponseHeaderTimeoutDoesNotLimitTheBody(t *testing.T) {
	srv, started, release := blockingServer(t, true)
	c := newClient(t, Options{ResponseHeaderTimeout: 20 * time.Millisecond})
	req, err := http.NewRequestWithContext(testwait.Context(t), http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	testwait.Done(t, started, "the server to start answering")
	go func() {
		time.Sleep(100 * time.Millisecond)
		close(release)
	}()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "first", string(b))
}

func TestRequestsInFlightAreBoundedPerHost(t *testing.T) {
	srv, started, release := blockingServer(t, true)
	c := newClient(t, Options{MaxConnsPerHost: 1})
	req, err := http.NewRequestWithContext(testwait.Context(t), http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	first, err := c.Do(req)
	require.NoError(t, err)
	testwait.Done(t, started, "the server to start answering")

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = get(ctx, c, http.MethodPost, srv.URL)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the second request waits for the first to finish")

	close(release)
	_, err = io.ReadAll(first.Body)
	require.NoError(t, err)
	first.Body.Close()
	_, err = get(testwait.Context(t), c, http.MethodPost, srv.URL)
	require.NoError(t, err)
}

func TestConcurrentRequestsEachGetAnAnswer(t *testing.T) {
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})
	c := newClient(t, Options{MaxConnsPerHost: 4})
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			for j := range 20 {
				want := strings.Repeat("x", i*100+j)
				req, err := http.NewRequestWithContext(testwait.Context(t), http.MethodPost, srv.URL, strings.NewReader(want))
				if !assert.NoError(t, err) {
					return
				}
				resp, err := c.Do(req)
				if !assert.NoError(t, err) {
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.NoError(t, err)
				assert.Equal(t, want, string(got))
			}
		})
	}
	testwait.Call(t, "every request to be answered", wg.Wait)
	assert.LessOrEqual(t, srv.opened.Load(), int64(4+4), "at most MaxConnsPerHost busy plus as many idle")
}

func TestRefusedConnectionIsClassified(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	c := newClient(t, Options{})
	_, err = get(testwait.Context(t), c, http.MethodPost, "http://"+addr+"/mcp")
	assert.Equal(t, transports.ClassRefused, transports.Classify(err))
}

func TestServerClosingMidResponseIsReset(t *testing.T) {
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	c := newClient(t, Options{})
	_, err := get(testwait.Context(t), c, http.MethodPost, srv.URL)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, transports.ClassReset, transports.Classify(err))
}

func TestProxiedRequestsGoThroughTheProxy(t *testing.T) {
	var proxied atomic.Value
	proxy := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		proxied.Store(r.URL.String())
		io.WriteString(w, "via proxy")
	})
	proxyURL, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	c := newClient(t, Options{Proxy: func(*http.Request) (*url.URL, error) { return proxyURL, nil }})
	got, err := get(testwait.Context(t), c, http.MethodGet, "http://mcp.example.test/mcp")
	require.NoError(t, err)
	assert.Equal(t, "via proxy", got)
	assert.Equal(t, "http://mcp.example.test/mcp", proxied.Load())
}

func TestRedirectsAreRefused(t *testing.T) {
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", http.StatusTemporaryRedirect)
	})
	c := newClient(t, Options{})
	_, err := get(testwait.Context(t), c, http.MethodPost, srv.URL)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refusing to follow a redirect")
}

func TestIdleConnectionsAreClosedAfterTheIdleTimeout(t *testing.T) {
	srv := newConnServer(t, echoMethod)
	c := newClient(t, Options{})
	c.Transport.(*inlineTransport).idleTimeout = 20 * time.Millisecond
	_, err := get(testwait.Context(t), c, http.MethodGet, srv.URL)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return srv.closed.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
}

func TestTLSAndUpgradeRequestsUseTheStandardTransport(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(echoMethod))
	defer srv.Close()
	c := newClient(t, Options{})
	c.Transport.(*inlineTransport).fallback.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
	got, err := get(testwait.Context(t), c, http.MethodPost, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, http.MethodPost, got)
	assert.Empty(t, c.Transport.(*inlineTransport).hosts, "https never reaches the inline path")
}
