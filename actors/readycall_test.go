package actors

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
