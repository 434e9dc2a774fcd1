package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
)

// TestACallThroughTheClusterHasTheDeadlineItWouldHaveOnOneNode: a call
// forwarded to the member that runs its server has the caller's
// deadline, else the server's timeoutMs, else the supervisor's
// CallTimeout, as on one node. It used to have the caller's deadline or
// a fixed 30 s, capped at 30 s on the owner: a server's timeoutMs and
// the supervisor's CallTimeout were ignored, and a longer call was cut
// at 30 s.
func TestACallThroughTheClusterHasTheDeadlineItWouldHaveOnOneNode(t *testing.T) {
	mockURL := serveMock(t)
	ports := freePorts(t, 2)
	log := newEventLog()
	m, err := Start(context.Background(), Options{
		Port: ports[0], ProviderPort: ports[1], Peers: []string{fmt.Sprintf("127.0.0.1:%d", ports[1])},
		OnMemberEvent: log.add,
		Supervisor:    mcpvisor.Options{CallTimeout: time.Second},
	})
	require.NoError(t, err)
	defer closeAll(t, m)
	servers := map[string]mcpvisor.ServerConfig{
		// No timeoutMs: the supervisor's CallTimeout (1 s) applies.
		"plain": {Config: transports.Config{Type: transports.TypeHTTP, URL: mockURL + "/plain"}},
		// Its own timeoutMs (1.5 s) applies, over CallTimeout.
		"timed": {Config: transports.Config{Type: transports.TypeHTTP, URL: mockURL + "/timed"}, TimeoutMs: 1500},
	}
	require.NoError(t, m.SetServers(servers))
	log.waitFor(t, "both servers ready", 30*time.Second, func(evs []MemberEvent) bool { return len(readyOn(evs)) == 2 })

	sleep := func(ms int) map[string]int { return map[string]int{"ms": ms} }
	// Without a deadline of the caller's, a 3 s call ends at the
	// supervisor's CallTimeout, or at the server's timeoutMs, with the
	// single-node timeout error.
	for _, server := range []string{"plain", "timed"} {
		_, err := m.CallServerTool(context.Background(), server, "sleep", sleep(3000))
		require.ErrorIs(t, err, mcpvisor.ErrTimeout, "server %s", server)
		require.ErrorIs(t, err, context.DeadlineExceeded, "server %s", server)
	}
	// The caller's deadline wins over both: a 2.5 s call within a 20 s
	// deadline completes.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, server := range []string{"plain", "timed"} {
		res, err := m.CallServerTool(ctx, server, "sleep", sleep(2500))
		require.NoError(t, err, "server %s", server)
		require.False(t, res.IsError, "server %s", server)
	}
	// A qualified name reaches the same server with the same deadline.
	require.Eventually(t, func() bool { return len(m.Tools()) > 0 }, 10*time.Second, 50*time.Millisecond)
	_, err = m.CallTool(context.Background(), "mcp__plain__sleep", sleep(3000))
	require.ErrorIs(t, err, mcpvisor.ErrTimeout)
}
