package mcpvisor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

// crash makes a server actor's supervisor handle a crash of it, the way
// protoactor does when Receive panics: the child's failure (with its
// restart statistics) reaches the registry, whose strategy decides. No
// hook in the actor: the failure goes through the real supervision path.
// One stats value per server counts the crashes, as the child's own would.
type crasher struct {
	s     *Supervisor
	stats map[*actor.PID]*actor.RestartStatistics
}

func newCrasher(s *Supervisor) *crasher {
	return &crasher{s: s, stats: map[*actor.PID]*actor.RestartStatistics{}}
}

func (c *crasher) crash(t *testing.T, pid *actor.PID) {
	t.Helper()
	rs := c.stats[pid]
	if rs == nil {
		rs = actor.NewRestartStatistics()
		c.stats[pid] = rs
	}
	proc, ok := c.s.system.ProcessRegistry.Get(c.s.reg.pid)
	require.True(t, ok, "the registry's process is registered")
	proc.SendSystemMessage(c.s.reg.pid, &actor.Failure{Who: pid, Reason: "injected crash", RestartStats: rs, Message: "crash"})
}

// A panic inside a server actor is caught by supervision: the actor
// restarts into a clean state, its in-flight calls fail at once, its old
// process is shut down, and it connects again.
func TestServerActorCrashRestartsCleanly(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"c": mock("-hang-on-call"), "other": plain()})
	oldPid := pidOf(s, "c")
	h, err := s.handle("c")
	require.NoError(t, err)

	calls := make(chan error, 1)
	go func() {
		_, err := s.CallTool(context.Background(), "mcp__c__echo", json.RawMessage(`{}`))
		calls <- err
	}()
	require.Eventually(t, func() bool { return statusOf(s, "c").InFlight == 1 }, 5*time.Second, 5*time.Millisecond)

	newCrasher(s).crash(t, h.pid)
	select {
	case err := <-calls:
		assert.ErrorIs(t, err, session.ErrServerRestarting, "the in-flight call fails at once")
	case <-time.After(5 * time.Second):
		t.Fatal("the in-flight call outlived the crash")
	}
	require.Eventually(t, func() bool {
		return statusOf(s, "c").State == StateReady && pidOf(s, "c") != oldPid
	}, 10*time.Second, 10*time.Millisecond, "the restarted actor connects again")
	assert.Empty(t, stdiotest.WaitGroupGone(oldPid, 5*time.Second), "the crashed instance's process is gone")
	assert.Equal(t, StateReady, statusOf(s, "other").State, "other servers are untouched")
}

// A server actor that keeps crashing is stopped by its supervision
// strategy and reported failed; the others carry on.
func TestServerActorCrashingRepeatedlyIsMarkedFailed(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"c": plain(), "other": plain()})
	h, err := s.handle("c")
	require.NoError(t, err)
	c := newCrasher(s)
	for range 4 {
		c.crash(t, h.pid)
	}
	require.Eventually(t, func() bool { return statusOf(s, "c").State == StateFailed }, 10*time.Second, 10*time.Millisecond)
	assert.Contains(t, statusOf(s, "c").LastError, "crashed repeatedly")
	_, err = s.CallTool(context.Background(), "mcp__other__echo", json.RawMessage(`{"text":"x"}`))
	assert.NoError(t, err)

	require.NoError(t, s.Server("c").Reconnect(context.Background()))
	require.Eventually(t, func() bool { return statusOf(s, "c").State == StateReady }, 10*time.Second, 10*time.Millisecond,
		"Reconnect gives a crash-looped server a fresh actor")
}
