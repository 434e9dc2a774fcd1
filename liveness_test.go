package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/mcpvisor/mcpvisor/protocol"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/session"
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
// noticed once it owes nothing: the calls to it end at their own
// deadlines (a call in flight is never struck: a busy server looks the
// same), then, silent with nothing in flight, the server gets probes,
// is struck out and reconnected, and the next call is answered by the new
// process. No call is in flight when it is restarted.
func TestHungStdioServerIsReconnected(t *testing.T) {
	t.Parallel()
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
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			_, err := s.CallTool(ctx, "mcp__hung__echo", json.RawMessage(`{"text":"1"}`))
			require.NoError(t, err, "the first call is answered")
			pid := serverPids(s)[0]
			before := statusOf(s, "hung").ConnectedSince

			// The second call hangs the server. A call written after it
			// finds the server silent too; over stdio with the input no
			// longer read, a large one blocks in the write. Both end at
			// their deadlines, well past the liveness threshold (the big
			// one last: over stdio its blocked write then ends the
			// connection).
			callCtx, callCancel := context.WithTimeout(ctx, 2*time.Second)
			defer callCancel()
			bigCtx, bigCancel := context.WithTimeout(ctx, 2500*time.Millisecond)
			defer bigCancel()
			big := make(chan error, 1)
			go func() {
				time.Sleep(50 * time.Millisecond) // testwait:ok the big call goes second
				_, err := s.CallTool(bigCtx, "mcp__hung__echo", json.RawMessage(`{"text":"`+strings.Repeat("x", 256<<10)+`"}`))
				big <- err
			}()
			_, err = s.CallTool(callCtx, "mcp__hung__echo", json.RawMessage(`{"text":"2"}`))
			require.Error(t, err)
			assert.ErrorIs(t, err, session.ErrTimeout, "the call in flight ends at its own deadline")
			assert.NotErrorIs(t, err, ErrUnresponsive, "a call in flight is never struck")
			select {
			case err := <-big:
				// Over stdio the write that blocked ends at the deadline
				// with part of the frame written: the connection cannot
				// go on and is closed.
				require.Error(t, err, "the call written to the hung server fails too")
				assert.True(t, errors.Is(err, session.ErrTimeout) || errors.Is(err, session.ErrConnectionClosed), "%v", err)
			case <-ctx.Done():
				t.Fatal("the call written to the hung server did not end")
			}
			assert.Equal(t, before, statusOf(s, "hung").ConnectedSince, "not restarted while calls were in flight")

			require.Eventually(t, func() bool {
				st := statusOf(s, "hung")
				return st.State == StateReady && len(serverPids(s)) == 1 && serverPids(s)[0] != pid
			}, 20*time.Second, 10*time.Millisecond, "the server, silent and owing nothing, is reconnected as a new process: %+v", statusOf(s, "hung"))
			res, err := s.CallTool(ctx, "mcp__hung__echo", json.RawMessage(`{"text":"again"}`))
			require.NoError(t, err)
			assert.Equal(t, "again", res.Content[0].Text)
		})
	}
}

// A single-threaded server busy with one long blocking call (the mock's
// block tool sleeps on the goroutine that reads its input: no ping is
// read or answered, no progress is sent) is at work, not hung: a call
// lasting 20 times ProbeAfter and about 5 times the time the probes need
// to strike a silent server out (300 ms + 3 × 200 ms) is answered, on
// the same process and connection, with no strike.
func TestBusySingleThreadedServerIsNotRestarted(t *testing.T) {
	t.Parallel()
	s := start(t, probeOptions())
	setAndSettle(t, s, map[string]ServerConfig{"busy": mock("-block-tool")})
	pid := serverPids(s)
	before := statusOf(s, "busy").ConnectedSince

	res, err := s.CallTool(t.Context(), "mcp__busy__block", json.RawMessage(`{"ms":6000}`))
	require.NoError(t, err, "a long blocking call is answered")
	assert.Equal(t, "blocked", res.Content[0].Text)

	st := statusOf(s, "busy")
	assert.Equal(t, StateReady, st.State)
	assert.Equal(t, before, st.ConnectedSince, "the same connection")
	assert.Zero(t, st.Strikes)
	assert.Equal(t, pid, serverPids(s), "the same process")
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
	t.Parallel()
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

// blockingServer is the mock over the in-process transport, with the
// block tool; with mute set it goes silent on its second call.
func blockingServer(mute int) inproc.Server {
	return inproc.ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		mockserver.Run(ctx, mockserver.Options{BlockTool: true, MuteOnCall: mute}, r, w)
		return nil
	})
}

// startInBubble starts a Supervisor with default options but for the
// in-process servers, sets them, and waits until they settled.
func startInBubble(t *testing.T, servers map[string]inproc.Server) *Supervisor {
	t.Helper()
	s, err := Start(context.Background(), Options{InProcess: servers})
	require.NoError(t, err)
	cfgs := map[string]ServerConfig{}
	for name := range servers {
		cfgs[name] = ServerConfig{Config: transports.Config{Type: transports.TypeSDK}}
	}
	_, err = s.SetServers(context.Background(), cfgs)
	require.NoError(t, err)
	require.NoError(t, s.WaitSettled(context.Background()))
	return s
}

// closeInBubble closes s within a (fake) minute, then lets protoactor's
// dead-letter throttle end: after a burst of dead letters (messages to
// actors Close stopped) it keeps a goroutine for one interval (100 ms),
// and the bubble must not end while it blocks.
func closeInBubble(t *testing.T, s *Supervisor) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.Close(ctx))
	time.Sleep(time.Second) // testwait:ok the fake clock of the bubble
}

// With the default settings (no option at all but the server), a
// single-threaded server's blocking calls of 70 s (longer than the
// probes need to strike a silent server out: about 45 s), 300 s (longer
// than the old two-minute default deadline) and 600 s are answered, on
// the same connection and with no strike, through a context without a
// deadline (on the fake clock of testing/synctest; the server runs in
// process).
func TestLongBlockingCallsSucceedByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := startInBubble(t, map[string]inproc.Server{"busy": blockingServer(0)})
		before := statusOf(s, "busy").ConnectedSince
		for _, d := range []time.Duration{70 * time.Second, 300 * time.Second, 600 * time.Second} {
			start := time.Now()
			res, err := s.CallTool(context.Background(), "mcp__busy__block", json.RawMessage(fmt.Sprintf(`{"ms":%d}`, d.Milliseconds())))
			require.NoError(t, err, "a %v blocking call", d)
			assert.Equal(t, "blocked", res.Content[0].Text)
			assert.Equal(t, d, time.Since(start).Round(time.Second), "answered when the server was done")
			st := statusOf(s, "busy")
			assert.Equal(t, before, st.ConnectedSince, "the same connection after the %v call", d)
			assert.Zero(t, st.Strikes)
		}
		closeInBubble(t, s)
	})
	runtime.GC() // pooled objects made in the bubble must not outlive it
	runtime.GC()
}

// With the default policy a server that goes silent is still noticed
// within a minute once it owes nothing: a call with a 30 s deadline ends
// at that deadline (a call in flight is never struck), and the silent
// server, owing nothing, is struck out and reconnected 30–60 s later
// (probes at once, its silence being older than ProbeAfter; three of
// 10 s), before anyone calls it again (on the fake clock of
// testing/synctest; the server runs in process).
func TestHungServerNoticedWithinAMinuteByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := startInBubble(t, map[string]inproc.Server{"hung": blockingServer(2)})
		ctx := context.Background()
		_, err := s.CallTool(ctx, "mcp__hung__echo", json.RawMessage(`{"text":"1"}`))
		require.NoError(t, err)
		before := statusOf(s, "hung").ConnectedSince

		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = s.CallTool(cctx, "mcp__hung__echo", json.RawMessage(`{"text":"2"}`))
		cancel()
		require.ErrorIs(t, err, session.ErrTimeout, "the call ends at its own deadline")
		require.NotErrorIs(t, err, ErrUnresponsive)
		ended := time.Now()

		for statusOf(s, "hung").ConnectedSince.Equal(before) && time.Since(ended) < 5*time.Minute {
			time.Sleep(100 * time.Millisecond) // testwait:ok the fake clock of the bubble
		}
		took := time.Since(ended)
		assert.Less(t, took, time.Minute, "reconnected within a minute of owing nothing")
		assert.GreaterOrEqual(t, took, 30*time.Second, "after three 10 s probes")
		t.Logf("a hung server owing nothing was reconnected %v after its call ended (fake clock)", took)

		res, err := s.CallTool(ctx, "mcp__hung__echo", json.RawMessage(`{"text":"again"}`))
		require.NoError(t, err, "the new connection answers")
		assert.Equal(t, "again", res.Content[0].Text)
		closeInBubble(t, s)
	})
	runtime.GC() // pooled objects made in the bubble must not outlive it
	runtime.GC()
}

// Progress moves a call's default deadline: with a 10 s CallTimeout, a
// call that asked for progress and gets a report every 5 s for 50 s is
// answered; the same call without progress ends at 10 s; a caller's own
// deadline never moves (on the fake clock of testing/synctest).
func TestProgressMovesTheDefaultDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := inproc.ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
			mockserver.Run(ctx, mockserver.Options{Progress: true}, r, w)
			return nil
		})
		s, err := Start(context.Background(), Options{InProcess: map[string]inproc.Server{"p": srv}, CallTimeout: 10 * time.Second})
		require.NoError(t, err)
		_, err = s.SetServers(context.Background(), map[string]ServerConfig{"p": {Config: transports.Config{Type: transports.TypeSDK}}})
		require.NoError(t, err)
		require.NoError(t, s.WaitSettled(context.Background()))
		args := json.RawMessage(`{"steps":10,"ms":5000}`)

		start := time.Now()
		reports := 0
		res, err := s.CallToolWith(context.Background(), "mcp__p__progress", args, CallOptions{Progress: func(protocol.ProgressParams) { reports++ }})
		require.NoError(t, err, "each report moved the 10 s deadline")
		assert.Equal(t, "done after 10 steps", res.Content[0].Text)
		assert.Equal(t, 50*time.Second, time.Since(start).Round(time.Second))
		assert.Equal(t, 10, reports)

		start = time.Now()
		_, err = s.CallTool(context.Background(), "mcp__p__progress", args)
		require.ErrorIs(t, err, session.ErrTimeout, "no progress asked for: the deadline stays")
		assert.Equal(t, 10*time.Second, time.Since(start).Round(time.Second))

		start = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err = s.CallToolWith(ctx, "mcp__p__progress", args, CallOptions{Progress: func(protocol.ProgressParams) {}})
		cancel()
		require.ErrorIs(t, err, session.ErrTimeout, "the caller's own deadline does not move")
		assert.Equal(t, 20*time.Second, time.Since(start).Round(time.Second))
		// The mock runs the abandoned calls to their end: let it.
		time.Sleep(time.Minute) // testwait:ok the fake clock of the bubble
		closeInBubble(t, s)
	})
	runtime.GC() // pooled objects made in the bubble must not outlive it
	runtime.GC()
}
