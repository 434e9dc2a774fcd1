package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/transports"
)

// TestWaitSettledWaitsForEveryServerOfTheCluster: the gateway's start-up
// wait in cluster mode (issue 35). A member's WaitSettled returns once
// every configured server shows settled in its cluster-wide view, so a
// client that lists then sees every server's tools, the one that takes
// 2 s to start included; a disabled server is not waited for. Before,
// a member had no WaitSettled, and `supervise --cluster` answered a
// client's first tools/list with whatever had connected.
// The gateway's start-up wait finds it: a member is a gateway.Settler.
var _ gateway.Settler = (*Member)(nil)

func TestWaitSettledWaitsForEveryServerOfTheCluster(t *testing.T) {
	fast := serveMock(t)
	mctx, cancel := context.WithCancel(context.Background())
	slow, err := mockserver.Serve(mctx, mockserver.Options{Transport: mockserver.TransportHTTP, Listen: "127.0.0.1:0", InitDelay: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { slow.Close(); cancel() })

	ports := freePorts(t, 2)
	m, err := Start(context.Background(), Options{
		Port: ports[0], ProviderPort: ports[1], Peers: []string{fmt.Sprintf("127.0.0.1:%d", ports[1])},
	})
	require.NoError(t, err)
	defer closeAll(t, m)
	http := func(url string) transports.Config { return transports.Config{Type: transports.TypeHTTP, URL: url} }
	require.NoError(t, m.SetServers(map[string]mcpvisor.ServerConfig{
		"fast": {Config: http(fast + "/fast")},
		"slow": {Config: http(slow.URL + "/slow")},
		"off":  {Config: http(fast + "/off"), Disabled: true},
	}))

	ctx, cancelWait := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancelWait()
	require.NoError(t, m.WaitSettled(ctx))
	servers := map[string]bool{}
	for _, tool := range m.Tools() {
		servers[tool.Server] = true
	}
	require.True(t, servers["fast"] && servers["slow"], "after WaitSettled the view has every started server's tools: %v", servers)
	require.False(t, servers["off"], "a disabled server offers nothing")
	for _, st := range m.Status() {
		if st.Name != "off" {
			require.Equal(t, mcpvisor.StateReady, st.State, st.Name)
		}
	}

	// A wait that cannot end in time ends with its context's error.
	require.NoError(t, m.SetServers(map[string]mcpvisor.ServerConfig{"late": {Config: http(slow.URL + "/late")}}))
	short, cancelShort := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancelShort()
	require.ErrorIs(t, m.WaitSettled(short), context.DeadlineExceeded)
}
