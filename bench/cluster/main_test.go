package main

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSmokeThirtyServersOverThreeMembers runs the whole benchmark at a
// small size with real processes, so that it keeps working: every server
// becomes ready, every load phase makes calls and none fails, and the
// killed member's servers are ready on a survivor afterwards.
func TestSmokeThirtyServersOverThreeMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts processes")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the benchmark reads /proc")
	}
	res, err := run(config{servers: 30, members: 3, workers: 2, duration: 300 * time.Millisecond,
		idle: 200 * time.Millisecond, timeout: 90 * time.Second})
	require.NoError(t, err)
	require.Len(t, res.Memory, 3)
	servers := 0
	for _, m := range res.Memory {
		servers += m.Servers
	}
	require.Equal(t, 30, servers, "servers ready over the members")
	require.Len(t, res.Loads, 4)
	for _, l := range res.Loads {
		if l.Note != "" {
			continue // a member that got no server: possible with 30
		}
		require.Positive(t, l.Calls, "calls in %q", l.Phase)
		require.Zero(t, l.Failed, "failed calls in %q: %v", l.Phase, l.Classes)
	}
	require.Equal(t, res.Rehome.Servers, res.Rehome.Done, "the killed member's servers ready on a survivor")
	require.Zero(t, res.Overlaps, "activations beside another live one")
}
