package mcpvisor

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// urlOnly is the config of a server given by its url alone: the
// transport is to be found out.
func urlOnly(url string) ServerConfig {
	return ServerConfig{Config: transports.Config{URL: url}}
}

// A url with no type whose server speaks only the legacy HTTP+SSE
// transport: the Streamable HTTP POST is refused (405 from the mock), the
// connect falls back to HTTP+SSE, status says "sse", and a reconnect goes
// straight to HTTP+SSE (no POST to the url again).
func TestURLWithoutTypeFallsBackToLegacySSE(t *testing.T) {
	mock, err := mockserver.NewHandler(mockserver.Options{Transport: mockserver.TransportSSE})
	require.NoError(t, err)
	var probes atomic.Int32 // POSTs to the url itself: Streamable HTTP attempts
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/sse" {
			probes.Add(1)
		}
		mock.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { _ = mock.(io.Closer).Close(); srv.Close() })

	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"legacy": urlOnly(srv.URL + "/sse")})
	st := statusOf(s, "legacy")
	require.Equal(t, StateReady, st.State, "the url-only legacy server connects: %+v", st)
	assert.Equal(t, "sse", st.Transport, "status says which transport was chosen")
	res, err := call(t, s, "mcp__legacy__echo", "over sse")
	require.NoError(t, err)
	assert.Equal(t, "over sse", res.Content[0].Text)
	tried := probes.Load()
	require.Positive(t, tried, "Streamable HTTP was tried first")

	h, err := s.handle("legacy")
	require.NoError(t, err)
	gen := h.view.Load().gen
	require.NoError(t, s.Server("legacy").Reconnect(context.Background()))
	require.Eventually(t, func() bool { v := h.view.Load(); return v.gen > gen && v.state == StateReady }, 10*time.Second, 10*time.Millisecond,
		"the server reconnects")
	assert.Equal(t, tried, probes.Load(), "the reconnect remembers HTTP+SSE: no Streamable HTTP POST again")
	assert.Equal(t, "sse", statusOf(s, "legacy").Transport)
	_, err = call(t, s, "mcp__legacy__echo", "again")
	assert.NoError(t, err)
}

// The official Go SDK's HTTP+SSE handler refuses a POST to its url with
// 400 ("sessionid must be provided"): a url-only config falls back to it.
func TestURLWithoutTypeFallsBackToGoSDKSSEServer(t *testing.T) {
	t.Parallel()
	bin := buildNested(t, "gosdkserver")
	port := freePort(t)
	proc := startServer(t, port, os.Environ(), bin, "-http", "127.0.0.1:"+strconv.Itoa(port), "-sse", "-versions", "2025-11-25,2025-06-18")
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"gosse": urlOnly(proc.url("/sse"))})
	st := statusOf(s, "gosse")
	require.Equal(t, StateReady, st.State, "%+v\n%s", st, proc.out.String())
	assert.Equal(t, "sse", st.Transport)
	goCall(t, s, "gosse")
}

// A url with no type whose server speaks Streamable HTTP stays on it.
func TestURLWithoutTypeKeepsStreamableHTTP(t *testing.T) {
	srv := serveMock(t, mockserver.Options{Transport: mockserver.TransportHTTP})
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"modern": urlOnly(srv.URL)})
	st := statusOf(s, "modern")
	require.Equal(t, StateReady, st.State, "%+v", st)
	assert.Equal(t, "http", st.Transport)
	assert.Equal(t, protocol.Version20260728, st.ProtocolVersion)
	_, err := call(t, s, "mcp__modern__echo", "over streamable http")
	assert.NoError(t, err)
}

// BenchmarkFallbackConnect measures one connect (dial, negotiate, list)
// of a legacy HTTP+SSE server: configured as sse; given by url alone the
// first time (Streamable HTTP refused, then HTTP+SSE); given by url alone
// once the choice is remembered.
func BenchmarkFallbackConnect(b *testing.B) {
	mock, err := mockserver.NewHandler(mockserver.Options{Transport: mockserver.TransportSSE})
	require.NoError(b, err)
	srv := httptest.NewServer(mock)
	b.Cleanup(func() { _ = mock.(io.Closer).Close(); srv.Close() })
	cfg := urlOnly(srv.URL + "/sse")
	sopts := session.Options{ClientInfo: protocol.Implementation{Name: "bench", Version: "0"}}
	connect := func(b *testing.B, run func(ctx context.Context) connectResult) {
		for b.Loop() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res := run(ctx)
			cancel()
			require.NoError(b, res.err)
			closeSession(res.sess, session.ErrConnectionClosed)
		}
	}
	b.Run("type-sse", func(b *testing.B) {
		typed := cfg
		typed.Type = transports.TypeSSE
		connect(b, func(ctx context.Context) connectResult { return connectOnce(ctx, typed, sopts, dialConfig{}) })
	})
	b.Run("url-only-first", func(b *testing.B) {
		connect(b, func(ctx context.Context) connectResult {
			var sseOnly atomic.Bool
			return connectAuto(ctx, cfg, sopts, dialConfig{}, &sseOnly)
		})
	})
	b.Run("url-only-remembered", func(b *testing.B) {
		var sseOnly atomic.Bool
		sseOnly.Store(true)
		connect(b, func(ctx context.Context) connectResult { return connectAuto(ctx, cfg, sopts, dialConfig{}, &sseOnly) })
	})
}
