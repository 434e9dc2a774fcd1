package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

func publishState(b *eventBus, server string) {
	b.publish(mcpvisor.EventServerState, server, func(h mcpvisor.EventHeader) mcpvisor.Event {
		return &mcpvisor.ServerStateEvent{EventHeader: h, State: mcpvisor.StateReady}
	})
}

// next receives one event within testwait.Patience.
func next(t *testing.T, ch <-chan mcpvisor.Event) mcpvisor.Event {
	t.Helper()
	return testwait.Recv(t, ch, "an event of the cluster bus")
}

// A cluster member's event stream numbers its events, replays the kept
// ones to a subscriber that resumes (with a gap event for those no longer
// kept), tells a slow subscriber how many it lost, and closes every
// subscription when the member closes.
func TestEventBus(t *testing.T) {
	b := newEventBus(0)
	ctx := t.Context()
	live := b.subscribe(ctx, false, 0, 0)
	for i := range busKeep + 10 {
		publishState(b, "s"+string(rune('a'+i%26)))
	}
	require.Equal(t, uint64(1), next(t, live).Header().Seq)

	// Resuming after seq 5: the first kept event is 11, so 5 are lost.
	resumed := b.subscribe(ctx, true, 5, 0)
	gap, ok := next(t, resumed).(*mcpvisor.GapEvent)
	require.True(t, ok, "a gap first")
	require.Equal(t, uint64(5), gap.Dropped)
	require.Equal(t, mcpvisor.GapCursorTooOld, gap.GapReason)
	require.Equal(t, uint64(11), next(t, resumed).Header().Seq)

	// A subscriber with a buffer of 1 (plus the replay room) loses events
	// and is told how many.
	slow := b.subscribe(ctx, false, 0, 1)
	for range cap(slow) + 3 {
		publishState(b, "x")
	}
	for range cap(slow) {
		next(t, slow)
	}
	publishState(b, "y")
	lost, ok := next(t, slow).(*mcpvisor.GapEvent)
	require.True(t, ok, "a gap before the next event")
	require.Equal(t, uint64(3), lost.Dropped)
	require.Equal(t, "y", next(t, slow).Header().Server)

	// A subscription whose context ends is closed; close ends the others.
	cctx, cancel := context.WithCancel(ctx)
	ended := b.subscribe(cctx, false, 0, 0)
	cancel()
	drainedClosed(t, ended, "the cancelled subscription to close")
	b.close()
	for _, ch := range []<-chan mcpvisor.Event{live, resumed, slow} {
		drainedClosed(t, ch, "a subscription to close with the bus")
	}
	drainedClosed(t, b.subscribe(ctx, false, 0, 0), "a subscription to a closed bus")
}

// drainedClosed reads ch until it is closed, failing t after
// testwait.Patience.
func drainedClosed(t *testing.T, ch <-chan mcpvisor.Event, what string) {
	t.Helper()
	timer := time.NewTimer(testwait.Patience)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatalf("waited %v for %s", testwait.Patience, what)
		}
	}
}
