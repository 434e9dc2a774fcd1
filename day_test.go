package mcpvisor

import (
	"context"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
)

// deadServer accepts connections and closes each at once, as a host
// whose MCP server is gone for good (behind a load balancer that still
// accepts). It counts the connections: one per request mcpvisor sends.
type deadServer struct {
	addr        string
	connections atomic.Int64
}

func newDeadServer(t *testing.T) *deadServer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	d := &deadServer{addr: l.Addr().String()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			d.connections.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		testwait.Done(t, done, "the accept loop to end")
	})
	return d
}

// A remote server that is gone for good costs a bounded number of
// requests over a whole (simulated) day, set by the reconnect policy: one
// episode of attempts, then nothing until something wakes it. Other
// gateways were measured sending thousands a day.
func TestADeadServerCostsABoundedNumberOfRequestsPerDay(t *testing.T) {
	dead := newDeadServer(t) // outside the bubble: its goroutine does network I/O
	for _, tc := range []struct {
		name   string
		policy ReconnectPolicy
		max    int64
	}{
		// Default policy: the first connect plus 6 attempts.
		{"default policy", ReconnectPolicy{}, 7},
		{"maxAttempts 2", ReconnectPolicy{MaxAttempts: 2}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dead.connections.Load()
			var sent int64
			synctest.Test(t, func(t *testing.T) {
				opts := Options{Reconnect: tc.policy, DiscoverTimeout: time.Second}
				s, err := Start(context.Background(), opts)
				require.NoError(t, err)
				_, err = s.SetServers(context.Background(), map[string]ServerConfig{
					// Pinned to the session era: one request per connect
					// attempt (no server/discover probe first).
					"gone": {Config: transports.Config{Type: transports.TypeHTTP, URL: "http://" + dead.addr + "/mcp"}, ProtocolVersion: "2025-11-25"},
				})
				require.NoError(t, err)

				time.Sleep(24 * time.Hour)
				st := statusOf(s, "gone")
				assert.Equal(t, StateFailed, st.State, "parked after its budget")
				assert.Contains(t, st.LastError, "gave up after")
				sent = dead.connections.Load() - before

				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				require.NoError(t, s.Close(ctx))
				time.Sleep(time.Second) // testwait:ok protoactor's dead-letter throttle, on the fake clock
			})
			// Pooled objects made in the bubble hold its channels (the
			// session's pooled calls); a later test outside it must not
			// reuse them. Two collections empty every sync.Pool.
			runtime.GC()
			runtime.GC()
			t.Logf("%s: %d requests to a dead server in a simulated day", tc.name, sent)
			assert.Equal(t, tc.max, sent)
		})
	}
}
