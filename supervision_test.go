package mcpvisor

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// The faults a faultProxy plays.
const (
	passThrough    int32 = iota
	answer503            // every request: 503 Service Unavailable
	answer401            // every request: 401 with a Bearer challenge
	pingNotFound         // ping: method not found; the rest passes
	slowPing             // ping: answered 100 ms late; the rest passes
	refuseAtListen       // the listener is closed: connections are refused
)

// faultProxy stands between the supervisor and an HTTP mock server and
// plays a fault on demand. It counts the requests that reach it.
type faultProxy struct {
	URL      string // the mock's endpoint, through the proxy
	mode     atomic.Int32
	requests atomic.Int64
	posts    atomic.Int64 // the requests that carry messages: connects and calls
	pings    atomic.Int64
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := &faultProxy{}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	rp.FlushInterval = -1 // event streams pass through as they come
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		if r.Method == http.MethodPost {
			p.posts.Add(1)
		}
		switch p.mode.Load() {
		case answer503:
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		case answer401:
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "token expired", http.StatusUnauthorized)
			return
		case slowPing:
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"method":"ping"`)) {
				p.pings.Add(1)
				select {
				case <-time.After(100 * time.Millisecond):
				case <-r.Context().Done():
					return
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		case pingNotFound:
			body, _ := io.ReadAll(r.Body)
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method == protocol.MethodPing {
				p.pings.Add(1)
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":{"code":-32601,"message":"Method not found"}}`)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL + u.Path
	return p
}

// httpMockBehindProxy serves the mock over Streamable HTTP (session era)
// behind a fault proxy.
func httpMockBehindProxy(t *testing.T) *faultProxy {
	srv := serveMock(t, mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}})
	return newFaultProxy(t, srv.URL)
}

// waitForState reads events until server reaches state, and returns that
// event.
func waitForState(t *testing.T, events <-chan eventRecord, server string, state State, within time.Duration) eventRecord {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev := <-events:
			if ev.Type == EventServerState && ev.Server == server && ev.State == state {
				return ev
			}
		case <-deadline:
			t.Fatalf("server %s did not reach %s within %v", server, state, within)
		}
	}
}

func TestThreeTransientErrorsInARowReconnect(t *testing.T) {
	proxy := httpMockBehindProxy(t)
	s := start(t, testOptions)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, proxy.URL)})

	proxy.mode.Store(answer503)
	for strike := 1; strike <= 2; strike++ {
		_, err := call(t, s, "mcp__r__echo", "x")
		var status *transports.HTTPStatusError
		require.ErrorAs(t, err, &status)
		assert.Equal(t, http.StatusServiceUnavailable, status.StatusCode)
		st := statusOf(s, "r")
		assert.Equal(t, StateReady, st.State, "strike %d leaves the connection up", strike)
		assert.Equal(t, strike, st.Strikes)
	}
	_, err := call(t, s, "mcp__r__echo", "x")
	require.Error(t, err)
	ev := waitForState(t, events, "r", StateReconnecting, 5*time.Second)
	assert.Contains(t, ev.Err, "503", "the third strike closes the connection")

	proxy.mode.Store(passThrough)
	res, err := call(t, s, "mcp__r__echo", "back")
	require.NoError(t, err, "the server is reconnected once it answers again")
	assert.Equal(t, "back", res.Content[0].Text)
	assert.Zero(t, statusOf(s, "r").Strikes)
}

func TestASuccessfulCallClearsTheStrikes(t *testing.T) {
	proxy := httpMockBehindProxy(t)
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, proxy.URL)})
	for range 3 {
		proxy.mode.Store(answer503)
		for range 2 {
			_, err := call(t, s, "mcp__r__echo", "x")
			require.Error(t, err)
		}
		proxy.mode.Store(passThrough)
		_, err := call(t, s, "mcp__r__echo", "x")
		require.NoError(t, err)
		assert.Zero(t, statusOf(s, "r").Strikes)
	}
	st := statusOf(s, "r")
	assert.Equal(t, StateReady, st.State)
	assert.Zero(t, st.Attempt, "never reconnected: no three strikes in a row")
}

// A JSON-RPC error is an answer: the connection works, so it is no strike.
func TestCallLevelErrorsAreNoStrikes(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"m": plain()})
	for range 5 {
		_, err := s.CallTool(t.Context(), "mcp__m__echo", json.RawMessage(`{"text":`)) // not JSON: refused by the server
		require.Error(t, err)
		res, err := s.CallTool(t.Context(), "mcp__m__fail", nil)
		require.NoError(t, err)
		assert.True(t, res.IsError)
	}
	assert.Zero(t, statusOf(s, "m").Strikes)
	assert.Equal(t, StateReady, statusOf(s, "m").State)
}

func TestFailingPingsReconnectAnIdleServer(t *testing.T) {
	proxy := httpMockBehindProxy(t)
	opts := testOptions
	opts.PingInterval = 20 * time.Millisecond
	s := start(t, opts)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, proxy.URL)})

	proxy.mode.Store(answer503)
	ev := waitForState(t, events, "r", StateReconnecting, 5*time.Second)
	assert.Contains(t, ev.Err, "503")
	proxy.mode.Store(passThrough)
	_, err := call(t, s, "mcp__r__echo", "x")
	require.NoError(t, err)
}

// Liveness pings never restart a server that answers them, however quiet
// it is otherwise: thirty pings on the bubble's clock, and the first
// connection is still the one in use.
// testwait:ok: it runs in a synctest bubble, whose sleeps and synctest.Wait
// are on the fake clock; a bubble that can never move on fails as a deadlock.
func TestASilentHealthyServerIsNeverRestarted(t *testing.T) {
	opts := testOptions
	opts.PingInterval = 10 * time.Millisecond
	inBubble(t, opts, map[string]mockserver.Options{"quiet": {}}, func(t *testing.T, s *Supervisor) {
		settleInBubble(t, s, map[string]ServerConfig{"quiet": inProcess()})
		h, err := s.handle("quiet")
		require.NoError(t, err)
		gen, since := h.view.Load().gen, statusOf(s, "quiet").ConnectedSince
		time.Sleep(300 * time.Millisecond) // some 30 pings
		synctest.Wait()
		st := statusOf(s, "quiet")
		assert.Equal(t, StateReady, st.State)
		assert.Equal(t, gen, h.view.Load().gen, "no new connection")
		assert.Equal(t, since, st.ConnectedSince)
		assert.Zero(t, st.Strikes)
	})
}

// A ping answered later than the ping interval is an answer, not a
// strike: the interval says how often to ask, not how fast a healthy
// server must be. (The interval was the ping's deadline too: under load,
// TestASilentHealthyServerIsNeverRestarted's 10 ms pings timed out three
// times in a row and its healthy server was restarted.)
func TestAPingAnsweredAfterTheIntervalIsNoStrike(t *testing.T) {
	proxy := httpMockBehindProxy(t)
	opts := testOptions
	opts.PingInterval = 10 * time.Millisecond
	s := start(t, opts)
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, proxy.URL)})
	since := statusOf(s, "r").ConnectedSince
	proxy.mode.Store(slowPing)
	require.Eventually(t, func() bool { return proxy.pings.Load() >= 5 }, testwait.Patience, time.Millisecond,
		"five pings, each answered ten intervals late")
	st := statusOf(s, "r")
	assert.Equal(t, StateReady, st.State)
	assert.Equal(t, since, st.ConnectedSince, "never reconnected")
	assert.Zero(t, st.Attempt)
}

func TestAServerWithoutPingIsNotPunished(t *testing.T) {
	proxy := httpMockBehindProxy(t)
	proxy.mode.Store(pingNotFound)
	opts := testOptions
	opts.PingInterval = 10 * time.Millisecond
	s := start(t, opts)
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, proxy.URL)})
	since := statusOf(s, "r").ConnectedSince
	time.Sleep(200 * time.Millisecond) // testwait:ok a check that nothing happens within a while
	st := statusOf(s, "r")
	assert.Equal(t, StateReady, st.State)
	assert.Equal(t, since, st.ConnectedSince)
	assert.EqualValues(t, 1, proxy.pings.Load(), "after method-not-found the server is not pinged again")
}

func TestAuthFailureParksTheServerInNeedsAuth(t *testing.T) {
	proxy := httpMockBehindProxy(t)
	s := start(t, testOptions)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, proxy.URL)})

	proxy.mode.Store(answer401)
	_, err := call(t, s, "mcp__r__echo", "x")
	require.Error(t, err)
	assert.Equal(t, FailureAuth, ClassifyFailure(err))
	// A 401 on a call is not yet a verdict on the connection (the OAuth
	// layer will refresh and retry); a connect refused with 401 is.
	require.NoError(t, s.Server("r").Reconnect(t.Context()))
	waitForState(t, events, "r", StateNeedsAuth, 5*time.Second)
	st := statusOf(s, "r")
	assert.Equal(t, FailureAuth, st.LastFailure)
	assert.False(t, hasTool(s, "mcp__r__echo"), "a parked server's tools leave the pool")

	// (The old session's DELETE may still arrive: it is not a request of
	// the parked server.)
	before := proxy.posts.Load()
	time.Sleep(300 * time.Millisecond) // testwait:ok longer than the whole backoff budget of testOptions; nothing is to happen
	assert.Equal(t, before, proxy.posts.Load(), "a parked server is sent nothing")
}

// A parked server makes no request until a call wakes it; the call waits
// for that one attempt.
// testwait:ok: it runs in a synctest bubble, whose sleeps and synctest.Wait
// are on the fake clock; a bubble that can never move on fails as a deadlock.
func TestACallWakesAParkedServer(t *testing.T) {
	opts := testOptions
	opts.Reconnect.MaxAttempts = -1 // park at the first failure
	inBubble(t, opts, map[string]mockserver.Options{"a": {ExitAfter: 1}}, func(t *testing.T, s *Supervisor) {
		settleInBubble(t, s, map[string]ServerConfig{
			"a":       inProcess(),
			"missing": {Config: transports.Config{Command: "mcpvisor-no-such-server"}},
		})
		_, err := call(t, s, "mcp__a__echo", "one")
		require.NoError(t, err)
		_, err = call(t, s, "mcp__a__echo", "two") // the server exits on it
		require.ErrorIs(t, err, session.ErrConnectionClosed)
		synctest.Wait() // the actor parks the server; the registry folds that into the pool
		require.Equal(t, StateFailed, statusOf(s, "a").State)
		require.False(t, hasTool(s, "mcp__a__echo"), "a parked server's tools leave the pool")

		res, err := call(t, s, "mcp__a__echo", "three")
		require.NoError(t, err, "the call woke the server and waited for it")
		assert.Equal(t, "three", res.Content[0].Text)
		synctest.Wait()
		require.True(t, hasTool(s, "mcp__a__echo"), "ready again: its tools are back")

		// A wake-up whose attempt fails ends the call with the server's
		// error, after exactly one attempt.
		h, err := s.handle("missing")
		require.NoError(t, err)
		gen := h.view.Load().gen
		_, _, err = s.Resources().List("missing")
		require.ErrorIs(t, err, ErrServerNotReady)
		_, err = s.Resources().Read(t.Context(), "missing", "mock://x")
		var nre *NotReadyError
		require.ErrorAs(t, err, &nre)
		assert.Equal(t, StateFailed, nre.State)
		assert.Nil(t, nre.Waited, "the call did not wait until its deadline")
		assert.Contains(t, err.Error(), "executable file not found")
		assert.Equal(t, gen+1, h.view.Load().gen, "one fresh attempt")
	})
}

// reconnectingServer returns a supervisor whose server "r" is waiting out
// a long backoff delay.
func reconnectingServer(t *testing.T, opts Options) (*Supervisor, *faultProxy) {
	proxy := httpMockBehindProxy(t)
	opts.Reconnect.InitialDelay = Duration(time.Minute)
	opts.Reconnect.Strikes = 1
	s := start(t, opts)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, proxy.URL)})
	proxy.mode.Store(answer503)
	_, err := call(t, s, "mcp__r__echo", "x")
	require.Error(t, err)
	waitForState(t, events, "r", StateReconnecting, 5*time.Second)
	proxy.mode.Store(passThrough)
	return s, proxy
}

func TestCallsWaitForAReconnectingServerUpToTheirDeadline(t *testing.T) {
	s, _ := reconnectingServer(t, testOptions)
	assert.True(t, hasTool(s, "mcp__r__echo"), "a reconnecting server keeps its tools in the pool")
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := s.CallTool(ctx, "mcp__r__echo", json.RawMessage(`{"text":"x"}`))
	var nre *NotReadyError
	require.ErrorAs(t, err, &nre)
	assert.Equal(t, StateReconnecting, nre.State)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, ErrServerNotReady)

	// Reconnect starts the next attempt now; a waiting call gets through.
	done := make(chan error, 1)
	go func() {
		_, err := call(t, s, "mcp__r__echo", "y")
		done <- err
	}()
	require.NoError(t, s.Server("r").Reconnect(t.Context()))
	require.NoError(t, testwait.Recv(t, done, "the call made across the reconnect"))
}

func TestFailFastCallsDoNotWait(t *testing.T) {
	opts := testOptions
	opts.FailFast = true
	s, _ := reconnectingServer(t, opts)
	_, err := call(t, s, "mcp__r__echo", "x")
	var nre *NotReadyError
	require.ErrorAs(t, err, &nre)
	assert.Equal(t, StateReconnecting, nre.State)
	assert.Nil(t, nre.Waited, "failed without waiting for the call's deadline")
}

// A call lost with its connection is never sent again, unless the host
// asked for replays and the server is trusted and the tool read-only and
// idempotent.
func TestOnlyTrustedIdempotentCallsAreReplayed(t *testing.T) {
	opts := testOptions
	opts.ReplayIdempotent = true
	s := start(t, opts)
	trusted := mock("-exit-after", "1")
	trusted.Trust = "trusted"
	setAndSettle(t, s, map[string]ServerConfig{"trusted": trusted, "untrusted": mock("-exit-after", "1")})

	for _, server := range []string{"trusted", "untrusted"} {
		_, err := call(t, s, "mcp__"+server+"__echo", "first")
		require.NoError(t, err)
	}
	res, err := call(t, s, "mcp__trusted__echo", "lost") // echo: readOnlyHint and idempotentHint
	require.NoError(t, err, "replayed on the restarted server")
	assert.Equal(t, "lost", res.Content[0].Text)

	_, err = call(t, s, "mcp__untrusted__echo", "lost")
	var lost *ConnectionLostError
	require.ErrorAs(t, err, &lost, "an untrusted server's annotations are not relied on")

	_, err = call(t, s, "mcp__trusted__echo", "second process") // the restarted process's one call
	require.NoError(t, err)
	_, err = s.CallTool(t.Context(), "mcp__trusted__sleep", json.RawMessage(`{"ms":1}`)) // not annotated
	require.ErrorAs(t, err, &lost, "a tool without the annotations is not replayed")
}

// A connection that lasts StableAfter ends the reconnect episode: the
// attempt count clears then, and not a moment before (on the bubble's
// clock, exactly).
// testwait:ok: it runs in a synctest bubble, whose sleeps and synctest.Wait
// are on the fake clock; a bubble that can never move on fails as a deadlock.
func TestAStableConnectionClearsTheReconnectHistory(t *testing.T) {
	opts := testOptions
	opts.Reconnect.StableAfter = Duration(200 * time.Millisecond)
	inBubble(t, opts, map[string]mockserver.Options{"a": {ExitAfter: 1}}, func(t *testing.T, s *Supervisor) {
		settleInBubble(t, s, map[string]ServerConfig{"a": inProcess()})
		_, _ = call(t, s, "mcp__a__echo", "one")
		_, err := call(t, s, "mcp__a__echo", "two")
		require.Error(t, err)
		_, err = call(t, s, "mcp__a__echo", "three") // waits for the reconnect; no time passes after it
		require.NoError(t, err)
		assert.Equal(t, 1, statusOf(s, "a").Attempt)
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, 1, statusOf(s, "a").Attempt, "not stable yet")
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		assert.Zero(t, statusOf(s, "a").Attempt, "stable: the episode is over")
	})
}

// A server that dies right after every connect exhausts its budget and
// parks: the attempt count is not cleared by connections that do not last.
// testwait:ok: it runs in a synctest bubble, whose sleeps and synctest.Wait
// are on the fake clock; a bubble that can never move on fails as a deadlock.
func TestAFlappingServerParksAfterItsBudget(t *testing.T) {
	opts := testOptions
	opts.FailFast = true // calls never wake the parked server
	inBubble(t, opts, map[string]mockserver.Options{"flap": {ExitAfter: 1}}, func(t *testing.T, s *Supervisor) {
		events := s.reg.subscribeRecords(t.Context(), false, 0, 1024)
		settleInBubble(t, s, map[string]ServerConfig{"flap": inProcess()}) // each connection dies on its second call
		for range 1000 {
			if statusOf(s, "flap").State == StateFailed {
				break
			}
			_, _ = call(t, s, "mcp__flap__echo", "x")
			time.Sleep(2 * time.Millisecond)
		}
		waitForState(t, events, "flap", StateFailed, 10*time.Second)
		st := statusOf(s, "flap")
		assert.Contains(t, st.LastError, "gave up after 6 reconnect attempts")
		assert.Equal(t, 6, st.Attempt)
	})
}

// A remote server that is gone for good costs a bounded number of
// requests, however long the supervisor runs.
func TestADeadRemoteServerCostsABoundedNumberOfRequests(t *testing.T) {
	proxy := httpMockBehindProxy(t)
	proxy.mode.Store(answer503)
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"dead": remoteServer(transports.TypeHTTP, proxy.URL)})
	require.Eventually(t, func() bool { return statusOf(s, "dead").State == StateFailed }, 10*time.Second, 10*time.Millisecond)
	spent := proxy.posts.Load()
	time.Sleep(500 * time.Millisecond) // testwait:ok a check that nothing happens within a while
	assert.Equal(t, spent, proxy.posts.Load(), "parked: nothing more")
	assert.LessOrEqual(t, spent, int64(2*(1+6)), "at most one connect (discover, then initialize) per attempt")
	assert.True(t, strings.Contains(statusOf(s, "dead").LastError, "gave up after 6"))
}

// A lazy server is not connected at start; a call that names it connects
// it and waits.
// testwait:ok: it runs in a synctest bubble, whose sleeps and synctest.Wait
// are on the fake clock; a bubble that can never move on fails as a deadlock.
func TestALazyServerConnectsOnItsFirstCall(t *testing.T) {
	inBubble(t, testOptions, map[string]mockserver.Options{"lazy": {}}, func(t *testing.T, s *Supervisor) {
		lazy := inProcess()
		lazy.Lazy = true
		settleInBubble(t, s, map[string]ServerConfig{"lazy": lazy})
		require.Equal(t, StatePending, statusOf(s, "lazy").State)
		require.NoError(t, s.Server("lazy").Ping(t.Context()))
		assert.Equal(t, StateReady, statusOf(s, "lazy").State)
		synctest.Wait()
		assert.True(t, hasTool(s, "mcp__lazy__echo"))
	})
}

func TestClassifyFailure(t *testing.T) {
	tests := []struct {
		err  error
		want FailureKind
	}{
		{nil, FailureNone},
		{&transports.HTTPStatusError{StatusCode: http.StatusServiceUnavailable}, FailureTransient},
		{&transports.HTTPStatusError{StatusCode: http.StatusNotImplemented}, FailureProtocol},
		{&transports.HTTPStatusError{StatusCode: http.StatusUnauthorized}, FailureAuth},
		{&transports.HTTPStatusError{StatusCode: http.StatusBadRequest}, FailureProtocol},
		{transports.ErrSessionExpired, FailureSessionExpired},
		{&transports.ConfigError{Err: io.EOF}, FailureConfig},
		{&transports.FrameTooLargeError{Size: 2, Limit: 1}, FailureProtocol},
		{session.ErrVersionMismatch, FailureProtocol},
		{&session.TimeoutError{Method: "tools/call"}, FailureCall},
		{protocol.NewError(protocol.CodeInvalidParams, "bad"), FailureCall},
		{context.Canceled, FailureCall},
		{ErrUnknownTool, FailureCall},
		{io.ErrUnexpectedEOF, FailureTransient},
		{session.ErrConnectionClosed, FailureClosed},
		{&NotReadyError{Server: "s", State: StateReconnecting, Cause: session.ErrConnectionClosed, Waited: context.DeadlineExceeded}, FailureClosed},
		{&NotReadyError{Server: "s", State: StatePending, Waited: context.DeadlineExceeded}, FailureCall},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ClassifyFailure(tt.err), "%v", tt.err)
	}
}
