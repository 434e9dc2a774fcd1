package ws

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wsServer runs handle on every accepted WebSocket (subprotocol "mcp"
// offered unless noMCP) and records the handshakes' headers.
type wsServer struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
	pings   atomic.Int32
	handled sync.WaitGroup
}

type serverOpts struct {
	noMCP   bool
	noPong  bool
	tls     bool
	handle  func(ctx context.Context, c *websocket.Conn)
	handler http.HandlerFunc // replaces the WebSocket handler entirely
}

func newServer(t *testing.T, o serverOpts) *wsServer {
	s := &wsServer{}
	h := o.handler
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) {
			// Added before the hijack, while httptest still tracks the
			// request, so that Close returning orders it before Wait.
			s.handled.Add(1)
			defer s.handled.Done()
			s.mu.Lock()
			s.headers = append(s.headers, r.Header.Clone())
			s.mu.Unlock()
			ao := &websocket.AcceptOptions{
				OnPingReceived: func(context.Context, []byte) bool { s.pings.Add(1); return !o.noPong },
			}
			if !o.noMCP {
				ao.Subprotocols = []string{"other", Subprotocol}
			}
			c, err := websocket.Accept(w, r, ao)
			if err != nil {
				return
			}
			defer c.CloseNow()
			o.handle(r.Context(), c)
		}
	}
	if o.tls {
		s.Server = httptest.NewUnstartedServer(h)
		s.EnableHTTP2 = true
		s.StartTLS()
	} else {
		s.Server = httptest.NewServer(h)
	}
	t.Cleanup(func() {
		s.CloseClientConnections()
		s.Close()
		testwait.Call(t, "the server's handlers to return", s.handled.Wait)
	})
	return s
}

// echo answers every message with itself.
func echo(ctx context.Context, c *websocket.Conn) {
	c.SetReadLimit(-1)
	for {
		typ, b, err := c.Read(ctx)
		if err != nil {
			return
		}
		if err := c.Write(ctx, typ, b); err != nil {
			return
		}
	}
}

func (s *wsServer) config() transports.Config {
	return transports.Config{
		Type:    transports.TypeWS,
		URL:     "ws" + strings.TrimPrefix(s.URL, "http") + "/mcp",
		Headers: map[string]string{"Authorization": "Bearer t0ken-value"},
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
	s := newServer(t, serverOpts{handle: echo})
	c, rec := dial(t, s.config(), Options{UserAgent: "mcpvisor-test"})
	for i := range 3 {
		require.NoError(t, c.Send(testwait.Context(t), fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)))
	}
	frames, _ := rec.Wait(t, 3)
	assert.Equal(t, []string{
		`{"jsonrpc":"2.0","id":0,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping"}`,
	}, frames)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.headers, 1)
	h := s.headers[0]
	assert.Equal(t, "Bearer t0ken-value", h.Get("Authorization"))
	assert.Equal(t, "mcpvisor-test", h.Get("User-Agent"))
	assert.Equal(t, Subprotocol, h.Get("Sec-WebSocket-Protocol"))
}

func TestConcurrentSendsNeverInterleave(t *testing.T) {
	s := newServer(t, serverOpts{handle: echo})
	c, rec := dial(t, s.config(), Options{})
	transporttest.SendsDoNotInterleave(t, c, rec, 12, 30, 1000)
}

func TestDialRequiresTheMCPSubprotocol(t *testing.T) {
	ended := make(chan struct{})
	s := newServer(t, serverOpts{noMCP: true, handle: func(ctx context.Context, c *websocket.Conn) {
		defer close(ended)
		c.Read(ctx)
	}})
	_, err := Dial(testwait.Context(t), s.config(), Options{}, transporttest.NewRecorder())
	var se *SubprotocolError
	require.ErrorAs(t, err, &se)
	assert.Empty(t, se.Got)
	assert.Equal(t, transports.ClassConfig, transports.Classify(err))
	assert.Contains(t, err.Error(), `"mcp" subprotocol`)
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the refused connection was not closed")
	}
}

func TestDialReportsTheHandshakesStatus(t *testing.T) {
	s := newServer(t, serverOpts{handler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		http.Error(w, "token expired", http.StatusUnauthorized)
	}})
	_, err := Dial(testwait.Context(t), s.config(), Options{}, transporttest.NewRecorder())
	var herr *transports.HTTPStatusError
	require.ErrorAs(t, err, &herr)
	assert.Equal(t, http.StatusUnauthorized, herr.StatusCode)
	assert.Equal(t, http.MethodGet, herr.Method)
	assert.Contains(t, string(herr.Body), "token expired")
	assert.Contains(t, herr.WWWAuthenticate, "invalid_token")
	assert.Equal(t, transports.ClassAuth, transports.Classify(err))
}

func TestDialRefusesABadURL(t *testing.T) {
	for _, u := range []string{"ftp://example.com/", "example.com/mcp", "ws:///nohost"} {
		_, err := Dial(testwait.Context(t), transports.Config{URL: u}, Options{}, transporttest.NewRecorder())
		assert.Equal(t, transports.ClassConfig, transports.Classify(err), u)
	}
}

func TestDialReportsARefusedConnectionWithoutTheURLsQuery(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	_, err = Dial(testwait.Context(t), transports.Config{URL: "ws://" + addr + "/mcp?token=s3cret"}, Options{}, transporttest.NewRecorder())
	require.Error(t, err)
	assert.Equal(t, transports.ClassRefused, transports.Classify(err))
	assert.NotContains(t, err.Error(), "s3cret")
	assert.Contains(t, err.Error(), addr+"/mcp")
}

func TestDialIsBoundedByItsContext(t *testing.T) {
	s := newServer(t, serverOpts{handler: func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Dial(ctx, s.config(), Options{}, transporttest.NewRecorder())
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, transports.ClassTimeout, transports.Classify(err))
}

func TestTheConnectionOutlivesDialsContext(t *testing.T) {
	s := newServer(t, serverOpts{handle: echo})
	ctx, cancel := context.WithCancel(context.Background())
	rec := transporttest.NewRecorder()
	c, err := Dial(ctx, s.config(), Options{}, rec)
	require.NoError(t, err)
	defer c.Close(testwait.Context(t))
	cancel()
	time.Sleep(20 * time.Millisecond) // testwait:ok not a wait: the dial context's end must have no effect
	require.NoError(t, c.Send(testwait.Context(t), []byte(`{"still":"up"}`)))
	rec.Wait(t, 1)
	rec.AssertOpen(t)
}

func TestWSSWithTheConfigsCAAndHTTP2Offered(t *testing.T) {
	s := newServer(t, serverOpts{tls: true, handle: echo})
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}), 0o600))
	cfg := s.config()
	cfg.URL = "wss" + strings.TrimPrefix(s.URL, "https") + "/mcp"
	cfg.TLS = &transports.TLSConfig{CAFile: ca}
	c, rec := dial(t, cfg, Options{})
	require.NoError(t, c.Send(testwait.Context(t), []byte(`{"tls":true}`)))
	frames, _ := rec.Wait(t, 1)
	assert.Equal(t, []string{`{"tls":true}`}, frames)

	cfg.TLS = nil // the test CA is not in the system's roots
	_, err := Dial(testwait.Context(t), cfg, Options{}, transporttest.NewRecorder())
	assert.Equal(t, transports.ClassTLS, transports.Classify(err), "%v", err)
}

func TestAnOversizeMessageIsDroppedAndTheConnectionGoesOn(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":5,"result":"` + strings.Repeat("b", 20000) + `"}`
	s := newServer(t, serverOpts{handle: func(ctx context.Context, c *websocket.Conn) {
		c.Write(ctx, websocket.MessageText, []byte(big))
		c.Write(ctx, websocket.MessageText, []byte(`{"small":1}`))
		echo(ctx, c)
	}})
	c, rec := dial(t, s.config(), Options{MaxFrameSize: 10000})
	frames, errs := rec.Wait(t, 2)
	assert.Equal(t, []string{`{"small":1}`}, frames)
	require.Len(t, errs, 1)
	var tl *transports.FrameTooLargeError
	require.ErrorAs(t, errs[0], &tl)
	assert.EqualValues(t, 10000, tl.Limit)
	assert.EqualValues(t, len(big), tl.Size)
	assert.Equal(t, big[:4096], string(tl.Prefix))

	require.NoError(t, c.Send(testwait.Context(t), []byte(`{"after":1}`)))
	frames, _ = rec.Wait(t, 3)
	assert.Equal(t, `{"after":1}`, frames[1], "the connection goes on")
	rec.AssertOpen(t)
}

func TestAMessageAtTheCapIsDelivered(t *testing.T) {
	s := newServer(t, serverOpts{handle: echo})
	c, rec := dial(t, s.config(), Options{MaxFrameSize: 100})
	at := `"` + strings.Repeat("a", 98) + `"`
	require.NoError(t, c.Send(testwait.Context(t), []byte(at)))
	frames, _ := rec.Wait(t, 1)
	assert.Equal(t, []string{at}, frames)
}

func TestBinaryMessagesAreFramesAndBlankOnesAreSkipped(t *testing.T) {
	s := newServer(t, serverOpts{handle: func(ctx context.Context, c *websocket.Conn) {
		c.Write(ctx, websocket.MessageBinary, []byte(`{"bin":1}`))
		c.Write(ctx, websocket.MessageText, []byte(" \n"))
		c.Write(ctx, websocket.MessageText, []byte(`{"text":2}`))
		echo(ctx, c)
	}})
	_, rec := dial(t, s.config(), Options{})
	frames, _ := rec.Wait(t, 2)
	assert.Equal(t, []string{`{"bin":1}`, `{"text":2}`}, frames)
}

func TestTheServersCloseFrameIsAClosedConnection(t *testing.T) {
	for _, code := range []websocket.StatusCode{websocket.StatusNormalClosure, websocket.StatusGoingAway, websocket.StatusInternalError} {
		t.Run(fmt.Sprint(int(code)), func(t *testing.T) {
			s := newServer(t, serverOpts{handle: func(ctx context.Context, c *websocket.Conn) {
				c.Write(ctx, websocket.MessageText, []byte(`{"bye":1}`))
				c.Close(code, "done here")
			}})
			c, rec := dial(t, s.config(), Options{})
			err := rec.WaitClosed(t)
			frames, _ := rec.Wait(t, 1)
			assert.Equal(t, []string{`{"bye":1}`}, frames)
			var ce *CloseError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, int(code), ce.Code)
			assert.Equal(t, "done here", ce.Reason)
			assert.ErrorIs(t, err, transports.ErrClosed)
			assert.Equal(t, transports.ClassClosed, transports.Classify(err))
			assert.ErrorIs(t, c.Send(testwait.Context(t), []byte(`{}`)), transports.ErrClosed)
		})
	}
}

func TestAConnectionDroppedWithoutACloseFrameIsReset(t *testing.T) {
	drop := make(chan struct{})
	s := newServer(t, serverOpts{handle: func(ctx context.Context, c *websocket.Conn) {
		<-drop       // testwait:ok the server's goroutine; the test closes drop
		c.CloseNow() // no close frame
	}})
	_, rec := dial(t, s.config(), Options{})
	close(drop)
	err := rec.WaitClosed(t)
	assert.Equal(t, transports.ClassReset, transports.Classify(err), "%v", err)
	assert.NotErrorIs(t, err, transports.ErrClosed)
}

func TestPingsKeepAHealthyConnection(t *testing.T) {
	s := newServer(t, serverOpts{handle: echo})
	_, rec := dial(t, s.config(), Options{PingInterval: 10 * time.Millisecond, PingTimeout: time.Second})
	require.Eventually(t, func() bool { return s.pings.Load() >= 3 }, 5*time.Second, 5*time.Millisecond)
	rec.AssertOpen(t)
}

func TestAMissedPongEndsTheConnectionWithATimeout(t *testing.T) {
	s := newServer(t, serverOpts{noPong: true, handle: echo})
	c, rec := dial(t, s.config(), Options{PingInterval: 20 * time.Millisecond, PingTimeout: 50 * time.Millisecond})
	err := rec.WaitClosed(t)
	assert.ErrorIs(t, err, ErrPingTimeout)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, transports.ClassTimeout, transports.Classify(err))
	assert.ErrorIs(t, c.Send(testwait.Context(t), []byte(`{}`)), transports.ErrClosed)
}

func TestPingsCanBeDisabled(t *testing.T) {
	s := newServer(t, serverOpts{noPong: true, handle: echo})
	_, rec := dial(t, s.config(), Options{PingInterval: -1, PingTimeout: time.Millisecond})
	time.Sleep(100 * time.Millisecond) // testwait:ok a check that nothing happens within a while
	assert.Zero(t, s.pings.Load())
	rec.AssertOpen(t)
}

func TestCloseSendsANormalClosure(t *testing.T) {
	got := make(chan error, 1)
	s := newServer(t, serverOpts{handle: func(ctx context.Context, c *websocket.Conn) {
		_, _, err := c.Read(ctx)
		got <- err
	}})
	c, rec := dial(t, s.config(), Options{})
	require.NoError(t, c.Close(testwait.Context(t)))
	assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(testwait.Recv(t, got, "the server's read to end with the close frame")))
	assert.Equal(t, transports.ErrClosed, rec.WaitClosed(t))
	assert.NoError(t, c.Close(testwait.Context(t)), "Close is idempotent")
	assert.ErrorIs(t, c.Send(testwait.Context(t), []byte(`{}`)), transports.ErrClosed)
}

func TestCloseIsSafeConcurrentlyWithSendsAndItself(t *testing.T) {
	s := newServer(t, serverOpts{handle: echo})
	c, rec := dial(t, s.config(), Options{})
	transporttest.CloseIsSafeConcurrently(t, c, rec, 50)
}

func TestCloseIsBoundedByItsContext(t *testing.T) {
	release := make(chan struct{})
	s := newServer(t, serverOpts{handle: func(ctx context.Context, c *websocket.Conn) {
		select { // never reads, so never answers the close frame
		case <-release:
		case <-ctx.Done():
		}
	}})
	defer close(release)
	c, rec := dial(t, s.config(), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Close(ctx)
	assert.Less(t, time.Since(start), 3*time.Second)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, transports.ErrClosed, rec.WaitClosed(t))
	// The reader ends at once; the library's close handshake may wait its
	// own 5 s for the server's close frame (coder/websocket's
	// waitCloseHandshake) before the last goroutine ends, so a 5 s bound
	// here raced it (3 runs in 20 of make flake's shuffle row).
	require.Eventually(t, func() bool { return c.Close(testwait.Context(t)) == nil }, testwait.Patience, 10*time.Millisecond,
		"the dropped connection's goroutines end")
}

func TestSendHonoursItsContext(t *testing.T) {
	release := make(chan struct{})
	s := newServer(t, serverOpts{handle: func(ctx context.Context, c *websocket.Conn) {
		select { // does not read: the client's writes back up
		case <-release:
		case <-ctx.Done():
		}
	}})
	defer close(release)
	c, rec := dial(t, s.config(), Options{PingInterval: -1})

	huge := bytes.Repeat([]byte("h"), 64<<20) // more than the socket buffers hold
	// The first send gives up when the test says, after the second has
	// given up: a timer of its own (300 ms) could fire first on a loaded
	// machine, and the second then met a closed connection (2 runs in 20
	// of make flake's cover row).
	first := make(chan error, 1)
	firstCtx, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	go func() { first <- c.Send(firstCtx, huge) }()
	require.Eventually(t, func() bool { return len(c.wlock) == 1 }, testwait.Patience, time.Millisecond,
		"the first send holds the connection's turn")

	// A second send gives up while waiting for its turn: nothing of it
	// was written, so its error is the context's alone.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := c.Send(ctx, []byte(`{}`))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, transports.ErrClosed)

	// The first gives up mid-message: the connection cannot go on.
	giveUp()
	select {
	case err := <-first:
		assert.ErrorIs(t, err, transports.ErrClosed)
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("the stuck send did not return")
	}
	cause := rec.WaitClosed(t)
	assert.ErrorIs(t, cause, transports.ErrClosed)
	assert.Contains(t, cause.Error(), "abandoned mid-message")
}

func TestSecretsStayOutOfLogsAndErrors(t *testing.T) {
	var logs bytes.Buffer
	log := zerolog.New(&logs).Level(zerolog.DebugLevel)
	s := newServer(t, serverOpts{handle: func(ctx context.Context, c *websocket.Conn) {
		c.Write(ctx, websocket.MessageBinary, []byte(`{}`))
		c.Close(websocket.StatusPolicyViolation, "")
	}})
	cfg := s.config()
	cfg.URL += "?key=s3cret"
	_, rec := dial(t, cfg, Options{Logger: log})
	err := rec.WaitClosed(t)
	out := logs.String() + err.Error()
	for _, secret := range []string{"t0ken-value", "s3cret"} {
		assert.NotContains(t, out, secret)
	}
}

func TestSubprotocolErrorSaysWhatTheServerChose(t *testing.T) {
	assert.Contains(t, (&SubprotocolError{Got: "graphql-ws"}).Error(), `"graphql-ws"`)
	assert.True(t, errors.Is(&CloseError{Code: 1000}, transports.ErrClosed))
}
