package mcpvisor

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// TestClosingManySessionsReusesConnections closes more Streamable HTTP
// sessions of one host at once than the shared client keeps idle
// connections for: their DELETEs take turns on the kept connections
// instead of dialing one each (10,000 sessions dialed 10,000 connections,
// and closing took seconds of CPU in connect(2)). Every session is still
// ended: the server sees one DELETE per session.
func TestClosingManySessionsReusesConnections(t *testing.T) {
	const n = 200 // well above the 64 DELETEs let through at once
	h, err := mockserver.NewHandler(mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}})
	require.NoError(t, err)
	var (
		mu      sync.Mutex
		dialed  int // connections the server accepted
		deletes int // DELETE requests it received
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			mu.Lock()
			deletes++
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			dialed++
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(func() {
		_ = h.(io.Closer).Close()
		srv.Close()
	})
	counts := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return dialed, deletes
	}

	s, err := Start(context.Background(), testOptions)
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = s.Close(ctx)
		}
	})
	servers := map[string]ServerConfig{}
	for i := range n {
		servers[fmt.Sprintf("s%03d", i)] = remoteServer(transports.TypeHTTP, srv.URL+"/mcp")
	}
	setAndSettle(t, s, servers)
	for name := range servers {
		require.Equal(t, StateReady, statusOf(s, name).State, "server %s", name)
	}
	dialedBefore, _ := counts()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, s.Close(ctx), "closing %d HTTP servers", n)
	closed = true

	dialedAfter, deleted := counts()
	require.Equal(t, n, deleted, "one DELETE per session")
	require.LessOrEqual(t, dialedAfter-dialedBefore, 64,
		"connections dialed to end %d sessions: the DELETEs must take turns on kept connections", n)
}
