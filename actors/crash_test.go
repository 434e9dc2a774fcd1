package actors

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/session"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

// crash is a message that makes a server actor panic (through
// testHookReceive).
type crash struct{}

// injectCrashes makes server actors panic on a crash message for the
// rest of the test.
func injectCrashes(t *testing.T) {
	hook := func(msg any) {
		if _, ok := msg.(crash); ok {
			panic("injected crash")
		}
	}
	testHookReceive.Store(&hook)
	t.Cleanup(func() { testHookReceive.Store(nil) })
}

// A panic inside a server actor is caught by supervision: the actor
// restarts into a clean state, its in-flight calls fail at once, its old
// process is shut down, and it connects again.
func TestServerActorCrashRestartsCleanly(t *testing.T) {
	injectCrashes(t)

	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"c": mock("-hang-on-call"), "other": mock()})
	oldPid := pidOf(s, "c")
	h, err := s.handle("c")
	require.NoError(t, err)

	calls := make(chan error, 1)
	go func() {
		_, err := s.CallTool(context.Background(), "mcp__c__echo", json.RawMessage(`{}`))
		calls <- err
	}()
	require.Eventually(t, func() bool { return statusOf(s, "c").InFlight == 1 }, 5*time.Second, 5*time.Millisecond)

	s.actors.Root.Send(h.pid, crash{})
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
	injectCrashes(t)

	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"c": mock(), "other": mock()})
	h, err := s.handle("c")
	require.NoError(t, err)
	for range 4 {
		s.actors.Root.Send(h.pid, crash{})
	}
	require.Eventually(t, func() bool { return statusOf(s, "c").State == StateFailed }, 10*time.Second, 10*time.Millisecond)
	assert.Contains(t, statusOf(s, "c").LastError, "crashed repeatedly")
	_, err = s.CallTool(context.Background(), "mcp__other__echo", json.RawMessage(`{"text":"x"}`))
	assert.NoError(t, err)

	require.NoError(t, s.Reconnect(context.Background(), "c"))
	require.Eventually(t, func() bool { return statusOf(s, "c").State == StateReady }, 10*time.Second, 10*time.Millisecond,
		"Reconnect gives a crash-looped server a fresh actor")
}
