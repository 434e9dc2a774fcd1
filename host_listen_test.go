package mcpvisor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	stdiot "github.com/mcpvisor/mcpvisor/transports/stdio"
)

// Resource subscriptions over stdio and Streamable HTTP, in both eras:
// resources/subscribe (2025-11-25) and a subscriptions/listen stream
// replaced on every change (2026-07-28). Each update arrives once; an
// unsubscribed URI's updates stop; a URI the server refuses is an error;
// after the server goes away and comes back, the subscriptions are back.
func TestResourceSubscriptionsAcrossErasAndTransports(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"stdio", "http"} {
		for _, version := range []string{protocol.Version20251125, protocol.Version20260728} {
			t.Run(transport+"/"+version, func(t *testing.T) {
				s := start(t, testOptions)
				var restart func()
				switch transport {
				case "stdio":
					cfg := mock("-subscribe", "-resources", "2")
					cfg.ProtocolVersion = version
					setAndSettle(t, s, map[string]ServerConfig{"m": cfg})
					restart = func() { killStdioServer(t, s, "m") }
				default:
					o := mockserver.Options{Transport: mockserver.TransportHTTP, Subscribe: true, Resources: 2, Versions: []string{version}}
					srv := serveMock(t, o)
					setAndSettle(t, s, map[string]ServerConfig{"m": remoteServer(transports.TypeHTTP, srv.URL)})
					restart = func() { srv = restartMock(t, srv, o) }
				}
				require.Equal(t, version, statusOf(s, "m").ProtocolVersion)
				events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
				const one, two = "mock://resource/1", "mock://resource/2"

				require.NoError(t, s.Resources().Subscribe(t.Context(), "m", one))
				assert.Contains(t, touch(t, s, one), "subscribed: true")
				assert.Equal(t, one, nextEvent(t, events, EventResourceUpdated, "m").URI)

				// A second URI: in 2026-07-28 a new stream replaces the
				// first, and the first URI's updates still arrive, once.
				require.NoError(t, s.Resources().Subscribe(t.Context(), "m", two))
				assert.Equal(t, []string{one, two}, s.Resources().Subscriptions("m"))
				touch(t, s, one)
				assert.Equal(t, one, nextEvent(t, events, EventResourceUpdated, "m").URI)
				touch(t, s, two)
				assert.Equal(t, two, nextEvent(t, events, EventResourceUpdated, "m").URI, "the update of %s came once", one)

				// Unsubscribed: no more updates of one (the update of two
				// sent after it is the next event).
				require.NoError(t, s.Resources().Unsubscribe(t.Context(), "m", one))
				assert.Equal(t, []string{two}, s.Resources().Subscriptions("m"))
				touch(t, s, one) // over stdio the server may not have processed the cancellation yet: the muted stream's update is dropped
				touch(t, s, two)
				assert.Equal(t, two, nextEvent(t, events, EventResourceUpdated, "m").URI, "no update of %s after unsubscribing", one)

				// A URI the server refuses.
				err := s.Resources().Subscribe(t.Context(), "m", "other://nothing")
				require.Error(t, err)
				if version == protocol.Version20260728 {
					assert.ErrorIs(t, err, ErrSubscriptionRefused)
				}
				assert.Equal(t, []string{two}, s.Resources().Subscriptions("m"), "a refused subscription is not kept")

				// The server goes away and comes back knowing nothing:
				// the subscription is restored.
				restart()
				awaitUpdate(t, s, events, two)
			})
		}
	}
}

// With the last URI unsubscribed, a 2026-07-28 server's resource stream
// is cancelled: over stdio the server hears notifications/cancelled for
// it, and updates stop.
func TestModernUnsubscribeCancelsTheStream(t *testing.T) {
	s := start(t, testOptions)
	cfg := mock("-subscribe", "-resources", "1", "-progress")
	cfg.ProtocolVersion = protocol.Version20260728
	setAndSettle(t, s, map[string]ServerConfig{"m": cfg})
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	const uri = "mock://resource/1"
	require.NoError(t, s.Resources().Subscribe(t.Context(), "m", uri))
	touch(t, s, uri)
	assert.Equal(t, uri, nextEvent(t, events, EventResourceUpdated, "m").URI)
	require.NoError(t, s.Resources().Unsubscribe(t.Context(), "m", uri))
	require.Eventually(t, func() bool {
		return strings.TrimSpace(toolText(t, s, "mcp__m__cancelled", `{}`)) == "1"
	}, 5*time.Second, 20*time.Millisecond, "the server was sent notifications/cancelled for the listen stream")
	assert.Contains(t, touch(t, s, uri), "subscribed: false", "the server forgot the stream")

	// Subscribing again opens a new stream.
	require.NoError(t, s.Resources().Subscribe(t.Context(), "m", uri))
	touch(t, s, uri)
	assert.Equal(t, uri, nextEvent(t, events, EventResourceUpdated, "m").URI)
}

// A subscription whose acknowledgement does not come by the deadline
// fails with it, and is not kept.
func TestModernSubscribeHonoursTheDeadline(t *testing.T) {
	s := start(t, testOptions)
	cfg := mock("-subscribe", "-resources", "1")
	cfg.ProtocolVersion = protocol.Version20260728
	setAndSettle(t, s, map[string]ServerConfig{"m": cfg})
	ctx, cancel := context.WithTimeout(t.Context(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	err := s.Resources().Subscribe(ctx, "m", "mock://resource/1")
	require.Error(t, err)
	assert.Empty(t, s.Resources().Subscriptions("m"))
}

// killStdioServer kills a stdio server's process and waits until the
// server is ready on a new one.
func killStdioServer(t *testing.T, s *Supervisor, name string) {
	t.Helper()
	h, err := s.handle(name)
	require.NoError(t, err)
	old := h.view.Load().sess
	require.NotNil(t, old)
	require.NoError(t, killPID(old.Conn().(*stdiot.Conn).Pid()))
	require.Eventually(t, func() bool {
		v := h.view.Load()
		return v.state == StateReady && v.sess != nil && v.sess != old
	}, 15*time.Second, 10*time.Millisecond)
}

// restartMock closes an HTTP mock server and serves a new one (which
// knows nothing of the old one's sessions and streams) on its address.
func restartMock(t *testing.T, srv *mockserver.Server, o mockserver.Options) *mockserver.Server {
	t.Helper()
	require.NoError(t, srv.Close())
	o.Listen = hostPort(t, srv.URL)
	var next *mockserver.Server
	require.Eventually(t, func() bool {
		n, err := mockserver.Serve(context.Background(), o)
		next = n
		return err == nil
	}, 5*time.Second, 20*time.Millisecond)
	t.Cleanup(func() { _ = next.Close() })
	return next
}

// awaitUpdate touches uri until an update of it arrives.
func awaitUpdate(t *testing.T, s *Supervisor, events <-chan eventRecord, uri string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err := s.CallTool(ctx, "mcp__m__touch", []byte(`{"uri":"`+uri+`"}`))
		cancel()
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		timeout := time.After(500 * time.Millisecond)
		for waiting := true; waiting; {
			select {
			case ev := <-events:
				if ev.Type == EventResourceUpdated && ev.Server == "m" && ev.URI == uri {
					return
				}
			case <-timeout:
				waiting = false
			}
		}
	}
	t.Fatalf("no update of %s after the server came back", uri)
}
