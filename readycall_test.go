package mcpvisor

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// A server's status turns ready a moment before the registry folds its
// tools into the pool (it spaces its rebuilds). A call made as soon as the
// status says ready waits for the pool instead of failing with
// ErrUnknownTool (TestServerErrorBurstIsRetriedWithBackoff did, one run
// in twenty under -race).
func TestACallAsSoonAsTheServerIsReadyFindsItsTool(t *testing.T) {
	s := start(t, testOptions)
	servers := map[string]ServerConfig{}
	for i := range 20 {
		name := fmt.Sprintf("r%02d", i)
		servers[name] = mock("-name", name)
		ctx := testwait.Context(t)
		_, err := s.SetServers(ctx, servers)
		require.NoError(t, err)
		for statusOf(s, name).State != StateReady {
			require.NoError(t, ctx.Err(), "waiting for %s to be ready", name)
			time.Sleep(10 * time.Microsecond)
		}
		_, err = s.CallTool(ctx, "mcp__"+name+"__echo", json.RawMessage(`{"text":"at once"}`))
		require.NoError(t, err, "a call to %s as soon as it is ready", name)
	}
}

// While a wave of servers connects and the registry folds them into the
// pool in batches, every status read with its tools agrees with them: a
// server's OfferedTools counts its tools in the list read with it
// (StatusAndTools, pooledStatus), and a server whose pool reflects its
// ready state has its tools there. Two separate reads (Status, then
// Tools) straddled a pool update: Connect returned a ready server with 5
// tools and OfferedTools 0, 2 runs in 30 under -race.
func TestAStatusAndItsToolsComeFromOnePool(t *testing.T) {
	s := start(t, testOptions)
	servers := map[string]ServerConfig{}
	for i := range 12 {
		servers[fmt.Sprintf("w%02d", i)] = mock()
	}
	ctx := testwait.Context(t)
	_, err := s.SetServers(ctx, servers)
	require.NoError(t, err)
	for {
		require.NoError(t, ctx.Err(), "waiting for every server to be ready and pooled")
		statuses, tools := s.StatusAndTools()
		count := map[string]int{}
		for _, tool := range tools {
			count[tool.Server]++
		}
		settled := true
		for _, st := range statuses {
			require.Equal(t, count[st.Name], st.OfferedTools, "%s: OfferedTools against its tools read with it", st.Name)
			one, pooled, err := s.pooledStatus(st.Name)
			require.NoError(t, err)
			own := one.Tools
			require.Len(t, own, one.OfferedTools, "%s: pooledStatus's tools against its OfferedTools", st.Name)
			if pooled && one.State == StateReady {
				require.NotEmpty(t, own, "%s is ready and pooled: its tools are in the pool", st.Name)
			}
			settled = settled && pooled && one.State == StateReady
		}
		if settled {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}
