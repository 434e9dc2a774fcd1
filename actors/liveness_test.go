package actors

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/session"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/inproc"
)

// probeOptions are testOptions with liveness thresholds small enough for
// a test: probe after 300 ms of silence, 200 ms per probe, 3 strikes.
func probeOptions() Options {
	o := testOptions
	o.Reconnect.ProbeAfter = Duration(300 * time.Millisecond)
	o.Reconnect.ProbeTimeout = Duration(200 * time.Millisecond)
	return o
}

// A stdio server that stops answering after its handshake — one that
// reads and never answers, one that no longer reads its input — is
// noticed without pingInterval: a call to it fails with ErrUnresponsive
// (long before its own deadline), the server is reconnected, and the next
// call is answered by the new process.
func TestHungStdioServerIsReconnected(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault string
	}{
		{"reads but never answers", "-mute-on-call"},
		{"stops reading stdin", "-stall-on-call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, probeOptions())
			setAndSettle(t, s, map[string]ServerConfig{"hung": mock(tc.fault, "2")})
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			_, err := s.CallTool(ctx, "mcp__hung__echo", json.RawMessage(`{"text":"1"}`))
			require.NoError(t, err, "the first call is answered")
			pid := serverPids(s)[0]

			// The second call hangs the server. Calls written after it
			// find the server silent too; over stdio with the input no
			// longer read, a large one blocks in the write.
			big := make(chan error, 1)
			go func() {
				time.Sleep(50 * time.Millisecond)
				_, err := s.CallTool(ctx, "mcp__hung__echo", json.RawMessage(`{"text":"`+strings.Repeat("x", 256<<10)+`"}`))
				big <- err
			}()
			_, err = s.CallTool(ctx, "mcp__hung__echo", json.RawMessage(`{"text":"2"}`))
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrUnresponsive, "the call fails because the server is unresponsive, not at its deadline")
			var lost *ConnectionLostError
			assert.ErrorAs(t, err, &lost)
			assert.NoError(t, ctx.Err(), "long before the call's deadline")
			select {
			case err := <-big:
				require.Error(t, err, "the call written to the hung server fails too")
				assert.True(t, errors.Is(err, session.ErrConnectionClosed) || errors.Is(err, session.ErrServerRestarting), "%v", err)
			case <-ctx.Done():
				t.Fatal("the call written to the hung server did not end")
			}

			require.Eventually(t, func() bool {
				st := statusOf(s, "hung")
				return st.State == StateReady && len(serverPids(s)) == 1 && serverPids(s)[0] != pid
			}, 30*time.Second, 10*time.Millisecond, "the server is reconnected as a new process")
			res, err := s.CallTool(ctx, "mcp__hung__echo", json.RawMessage(`{"text":"again"}`))
			require.NoError(t, err)
			assert.Equal(t, "again", res.Content[0].Text)
		})
	}
}

// A slow tool is not a hung server: a call that is not answered for a
// long time, on a server that still answers pings, is never struck; the
// connection stays (same process, no strikes) and the call ends at its
// own deadline with a timeout. A tool that takes longer than ProbeAfter
// and then answers is answered.
func TestSlowToolIsNotStruck(t *testing.T) {
	s := start(t, probeOptions())
	setAndSettle(t, s, map[string]ServerConfig{"slow": mock("-hang-on-call"), "sleepy": plain()})
	pid := serverPids(s)
	before := statusOf(s, "slow").ConnectedSince

	ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	_, err := s.CallTool(ctx, "mcp__slow__echo", json.RawMessage(`{"text":"never answered"}`))
	require.Error(t, err)
	assert.ErrorIs(t, err, session.ErrTimeout, "the call ends at its own deadline")
	assert.NotErrorIs(t, err, ErrUnresponsive)

	res, err := s.CallTool(t.Context(), "mcp__sleepy__sleep", json.RawMessage(`{"ms":1500}`))
	require.NoError(t, err, "a tool slower than ProbeAfter is answered")
	assert.Equal(t, "slept", res.Content[0].Text)

	st := statusOf(s, "slow")
	assert.Equal(t, StateReady, st.State)
	assert.Equal(t, before, st.ConnectedSince, "the same connection")
	assert.Zero(t, st.Strikes)
	assert.Equal(t, pid, serverPids(s), "the same processes")
}

// With the probes turned off (probeAfter negative) a hung server is left
// alone: calls to it end at their deadlines, as before probes existed.
func TestProbesOff(t *testing.T) {
	o := probeOptions()
	o.Reconnect.ProbeAfter = -1
	s := start(t, o)
	setAndSettle(t, s, map[string]ServerConfig{"hung": mock("-mute-on-call", "1")})
	before := statusOf(s, "hung").ConnectedSince
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	_, err := s.CallTool(ctx, "mcp__hung__echo", json.RawMessage(`{"text":"1"}`))
	assert.ErrorIs(t, err, session.ErrTimeout)
	assert.NotErrorIs(t, err, ErrUnresponsive)
	st := statusOf(s, "hung")
	assert.Equal(t, StateReady, st.State)
	assert.Equal(t, before, st.ConnectedSince)
}

// With the default policy (no setting at all) a server that goes silent
// is noticed within a minute: a call with a five-minute deadline fails
// with ErrUnresponsive 45–60 s after the server stopped answering (on the
// fake clock of testing/synctest; the server runs in process).
func TestHungServerNoticedWithinAMinuteByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hung := inproc.ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
			mockserver.Run(ctx, mockserver.Options{MuteOnCall: 2}, r, w)
			return nil
		})
		s, err := Start(Options{InProcess: map[string]inproc.Server{"hung": hung}})
		require.NoError(t, err)
		ctx := context.Background()
		_, err = s.SetServers(ctx, map[string]ServerConfig{"hung": {Config: transports.Config{Type: transports.TypeSDK}}})
		require.NoError(t, err)
		require.NoError(t, s.WaitSettled(ctx))
		_, err = s.CallTool(ctx, "mcp__hung__echo", json.RawMessage(`{"text":"1"}`))
		require.NoError(t, err)

		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		_, err = s.CallTool(cctx, "mcp__hung__echo", json.RawMessage(`{"text":"2"}`))
		cancel()
		took := time.Since(start)
		require.ErrorIs(t, err, ErrUnresponsive)
		assert.Less(t, took, time.Minute, "noticed within a minute")
		assert.GreaterOrEqual(t, took, 45*time.Second, "after 15 s of silence and three 10 s probes")
		t.Logf("a hung server was noticed after %v (fake clock)", took)

		cctx, cancel = context.WithTimeout(ctx, time.Minute)
		defer cancel()
		require.NoError(t, s.Close(cctx))
	})
	runtime.GC() // pooled objects made in the bubble must not outlive it
	runtime.GC()
}
