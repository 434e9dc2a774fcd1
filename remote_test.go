package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/inproc"
)

// Remote servers, against the mock server's HTTP modes in this process:
// every transport end to end through the supervisor, and the HTTP faults
// a remote server shows in production.

// serveMock starts a mock server over o.Transport and stops it at the end
// of the test.
func serveMock(t *testing.T, o mockserver.Options) *mockserver.Server {
	t.Helper()
	srv, err := mockserver.Serve(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func remoteServer(kind transports.Type, url string) ServerConfig {
	return ServerConfig{Config: transports.Config{Type: kind, URL: url}}
}

func call(t *testing.T, s *Supervisor, tool, text string) (*protocol.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args, _ := json.Marshal(map[string]string{"text": text})
	return s.CallTool(ctx, tool, args)
}

func hasTool(s *Supervisor, name string) bool {
	for _, tool := range s.Tools() {
		if tool.Name == name {
			return true
		}
	}
	return false
}

// Every remote transport, and both eras of Streamable HTTP: the server
// connects, its tools are called, its resources read, and a tool it adds
// at runtime reaches the pool through list_changed (on the GET stream,
// the SSE stream, the WebSocket, or a subscriptions/listen stream).
func TestRemoteServersEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		name      string
		transport string
		kind      transports.Type
		versions  []string
		wantVer   string
	}{
		{"http-stateless", mockserver.TransportHTTP, transports.TypeHTTP, nil, protocol.Version20260728},
		{"http-session", mockserver.TransportHTTP, transports.TypeHTTP, []string{protocol.Version20251125, protocol.Version20250326}, protocol.Version20251125},
		{"http-2025-03-26", mockserver.TransportHTTP, transports.TypeHTTP, []string{protocol.Version20250326}, protocol.Version20250326},
		{"sse", mockserver.TransportSSE, transports.TypeSSE, []string{protocol.Version20241105}, protocol.Version20241105},
		{"ws", mockserver.TransportWS, transports.TypeWS, nil, protocol.Version20260728},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serveMock(t, mockserver.Options{Transport: tc.transport, Versions: tc.versions, Resources: 2, SSEResponses: tc.name == "http-session"})
			s := start(t, testOptions)
			setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(tc.kind, srv.URL)})
			st := statusOf(s, "r")
			require.Equal(t, StateReady, st.State, st.LastError)
			assert.Equal(t, tc.wantVer, st.ProtocolVersion)
			assert.Equal(t, string(tc.kind), st.Transport)

			res, err := call(t, s, "mcp__r__echo", "over "+tc.name)
			require.NoError(t, err)
			require.NotEmpty(t, res.Content)
			assert.Equal(t, "over "+tc.name, res.Content[0].Text)

			read, err := s.Resources().Read(context.Background(), "r", "mock://resource/1")
			require.NoError(t, err)
			require.NotEmpty(t, read.Contents)
			assert.Contains(t, read.Contents[0].Text, "mock://resource/1")

			_, err = call(t, s, "mcp__r__announce", "late_tool")
			require.NoError(t, err)
			require.Eventually(t, func() bool { return hasTool(s, "mcp__r__late_tool") }, 10*time.Second, 10*time.Millisecond,
				"list_changed reaches the pool")
		})
	}
}

// A server that forgets sessions answers 404; the supervisor initializes
// a new session and the refused call is sent again on it: the caller sees
// nothing but a successful call.
func TestExpiredSessionIsReplacedAndTheCallRetried(t *testing.T) {
	srv := serveMock(t, mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}, ExpireSessionAfter: 2})
	s := start(t, testOptions)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 64)
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, srv.URL)})

	for i := range 6 {
		res, err := call(t, s, "mcp__r__echo", "call")
		require.NoError(t, err, "call %d", i)
		assert.Equal(t, "call", res.Content[0].Text)
	}
	assert.Equal(t, StateReady, statusOf(s, "r").State)
	for {
		select {
		case ev := <-events:
			assert.NotEqual(t, StateFailed, ev.State, "an expired session is not a failure: %+v", ev)
			continue
		default:
		}
		break
	}
}

// A burst of 503s while connecting fails that connect; the supervisor
// tries again after a backoff and the server comes up.
func TestServerErrorBurstIsRetriedWithBackoff(t *testing.T) {
	srv := serveMock(t, mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}, HTTP5xx: 1})
	s := start(t, testOptions)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 64)
	_, err := s.SetServers(context.Background(), map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, srv.URL)})
	require.NoError(t, err)

	var failure string
	deadline := time.After(15 * time.Second)
	for statusOf(s, "r").State != StateReady || failure == "" {
		select {
		case ev := <-events:
			if ev.State == StateReconnecting {
				failure = ev.Err
			}
		case <-deadline:
			t.Fatalf("not ready after a 503 burst: %+v (failure seen: %q)", statusOf(s, "r"), failure)
		}
	}
	assert.Contains(t, failure, "503")
	assert.Empty(t, statusOf(s, "r").LastErrorClass, "a ready server has no error")
	_, err = call(t, s, "mcp__r__echo", "after the burst")
	assert.NoError(t, err)
}

// A response stream the server drops before the response is resumed with
// Last-Event-ID and the call completes.
func TestDroppedResponseStreamIsResumed(t *testing.T) {
	srv := serveMock(t, mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125},
		SSEResponses: true, DropStream: true, SSERetry: 20 * time.Millisecond})
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, srv.URL)})
	res, err := call(t, s, "mcp__r__echo", "resumed")
	require.NoError(t, err)
	assert.Equal(t, "resumed", res.Content[0].Text)
}

// A server slow to send its first byte costs a call its deadline, with a
// typed timeout, and nothing else: the next call with time to spare works.
func TestSlowFirstByteEndsTheCallAtItsDeadline(t *testing.T) {
	srv := serveMock(t, mockserver.Options{Transport: mockserver.TransportHTTP, FirstByteDelay: 300 * time.Millisecond})
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, srv.URL)})

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := s.CallTool(ctx, "mcp__r__echo", json.RawMessage(`{"text":"x"}`))
	require.Error(t, err)
	// The server would answer after 300 ms: a timeout means the 100 ms
	// deadline ended the call.
	assert.True(t, errors.Is(err, session.ErrTimeout) || errors.Is(err, context.DeadlineExceeded), err.Error())

	_, err = call(t, s, "mcp__r__echo", "patient")
	assert.NoError(t, err)
}

// A stream-based server (legacy SSE, WebSocket) that goes away and comes
// back on the same address is reconnected by itself.
func TestStreamServersAreReconnectedAfterARestart(t *testing.T) {
	for _, tc := range []struct {
		transport string
		kind      transports.Type
	}{
		{mockserver.TransportSSE, transports.TypeSSE},
		{mockserver.TransportWS, transports.TypeWS},
		{mockserver.TransportHTTP, transports.TypeHTTP},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			o := mockserver.Options{Transport: tc.transport, Versions: []string{protocol.Version20251125, protocol.Version20241105}}
			first := serveMock(t, o)
			s := start(t, testOptions)
			setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(tc.kind, first.URL)})
			_, err := call(t, s, "mcp__r__echo", "before")
			require.NoError(t, err)

			require.NoError(t, first.Close())
			o.Listen = hostPort(t, first.URL)
			var second *mockserver.Server
			require.Eventually(t, func() bool {
				srv, err := mockserver.Serve(context.Background(), o)
				if err != nil {
					return false // the port is still being released
				}
				second = srv
				return true
			}, 5*time.Second, 20*time.Millisecond)
			t.Cleanup(func() { _ = second.Close() })

			require.Eventually(t, func() bool {
				_, err := call(t, s, "mcp__r__echo", "after")
				return err == nil
			}, 20*time.Second, 50*time.Millisecond, "the server is reconnected after its restart")
		})
	}
}

// A stateless server has no connection to lose: when it goes away, its
// listen stream cannot be reopened, and after a few attempts the server
// counts as lost and is reconnected once it is back.
func TestStatelessServerThatGoesAwayIsReconnected(t *testing.T) {
	o := mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20260728}}
	first := serveMock(t, o)
	opts := testOptions
	opts.Reconnect.ListenDelay, opts.Reconnect.ListenFailures = Duration(10*time.Millisecond), 3
	s := start(t, opts)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 64)
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, first.URL)})
	require.Equal(t, protocol.Version20260728, statusOf(s, "r").ProtocolVersion)
	require.NoError(t, first.Close())

	deadline := time.After(15 * time.Second)
	for failed := false; !failed; {
		select {
		case ev := <-events:
			failed = ev.State == StateReconnecting && strings.Contains(ev.Err, "subscriptions/listen")
		case <-deadline:
			t.Fatalf("a stateless server that went away still looks %s", statusOf(s, "r").State)
		}
	}

	o.Listen = hostPort(t, first.URL)
	second, err := mockserver.Serve(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = second.Close() })
	require.Eventually(t, func() bool {
		_, err := call(t, s, "mcp__r__echo", "back")
		return err == nil
	}, 20*time.Second, 50*time.Millisecond, "reconnected once the server is back")
}

func hostPort(t *testing.T, rawURL string) string {
	t.Helper()
	rest := rawURL[strings.Index(rawURL, "://")+3:]
	host := rest[:strings.IndexByte(rest, '/')]
	_, _, err := net.SplitHostPort(host)
	require.NoError(t, err)
	return host
}

// A Go MCP server living in the host's process is supervised like any
// other, through Options.InProcess.
func TestInProcessServer(t *testing.T) {
	opts := testOptions
	opts.InProcess = map[string]inproc.Server{
		"local": inproc.ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
			mockserver.Run(ctx, mockserver.Options{Name: "in-process"}, r, w)
			return nil
		}),
	}
	s := start(t, opts)
	setAndSettle(t, s, map[string]ServerConfig{
		"local":      {Config: transports.Config{Type: transports.TypeSDK}},
		"unexpected": {Config: transports.Config{Type: transports.TypeSDK}},
	})
	st := statusOf(s, "local")
	require.Equal(t, StateReady, st.State, st.LastError)
	assert.Equal(t, "in-process", st.ServerInfo.Name)
	res, err := call(t, s, "mcp__local__echo", "same process")
	require.NoError(t, err)
	assert.Equal(t, "same process", res.Content[0].Text)

	bad := statusOf(s, "unexpected")
	assert.Equal(t, StateFailed, bad.State)
	assert.Contains(t, bad.LastError, "no in-process server")
	assert.Equal(t, "config", bad.LastErrorClass)
}
