package mcpvisor

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
)

// A connect wave rebuilds the tool pool at most once per waveFlushSpacing
// (issue 21: the rebuild is O(pool), and a wave of a thousand servers
// rebuilt it hundreds of times), and the wave's last settle flushes at
// once: the pool is whole when WaitSettled returns, without waiting for
// the spacing. On the bubble's clock the wave takes exactly rounds ×
// InitDelay.
func TestConnectWaveRebuildsThePoolSparingly(t *testing.T) {
	const servers, limit, initDelay = 30, 3, 20 * time.Millisecond
	mocks := map[string]mockserver.Options{}
	configs := map[string]ServerConfig{}
	for i := range servers {
		name := fmt.Sprintf("w%02d", i)
		mocks[name] = mockserver.Options{InitDelay: initDelay}
		configs[name] = inProcess()
	}
	opts := testOptions
	opts.LocalConnectLimit = limit
	inBubble(t, opts, mocks, func(t *testing.T, s *Supervisor) {
		events := s.reg.subscribeRecords(t.Context(), false, 0, 4096)
		began := time.Now()
		settleInBubble(t, s, configs)
		elapsed := time.Since(began)
		synctest.Wait() // every event is in the channel; testwait:ok a bubble that cannot settle panics as deadlocked

		wave := time.Duration(servers/limit) * initDelay
		assert.Less(t, elapsed, wave+waveFlushSpacing/2, "WaitSettled waited for a flush's spacing after the wave ended")
		// Each rebuild that adds tools publishes tools_changed events
		// carrying the pool's size then: during a wave the pool only
		// grows, so its distinct sizes count the rebuilds.
		sizes := map[int]bool{}
		for len(events) > 0 {
			if ev := <-events; ev.Type == EventToolsChanged { // testwait:ok len > 0, and no other reader
				sizes[ev.Tools] = true
			}
		}
		maxRebuilds := int(wave/waveFlushSpacing) + 2
		assert.LessOrEqual(t, len(sizes), maxRebuilds, "pool rebuilds during a wave of %v (sizes %v)", wave, sizes)
		for name := range configs {
			require.Equal(t, StateReady, statusOf(s, name).State, "server %s", name)
			assert.True(t, hasTool(s, "mcp__"+name+"__echo"), "the pool has %s's tools when the wave has settled", name)
		}
	})
}
