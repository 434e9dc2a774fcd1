package mcpvisor

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/actors/admission"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/internal/testserver"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	stdiot "github.com/mcpvisor/mcpvisor/transports/stdio"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

// TestMain is example_test.go's (one per package and its tests).

func mock(args ...string) ServerConfig {
	return ServerConfig{Config: mockserver.Command(args...)}
}

// plain is a server that misbehaves in no way (echo, add, fail, sleep,
// announce, meta): internal/testserver over stdio, for the tests that need
// none of the mock's fault modes or options.
func plain() ServerConfig {
	return ServerConfig{Config: testserver.Command()}
}

// plainTools is how many tools plain's server lists.
const plainTools = 6

var testOptions = Options{
	CloseStdinTimeout: 500 * time.Millisecond,
	TerminateTimeout:  500 * time.Millisecond,
	ConnectTimeout:    10 * time.Second,
	// Short backoff delays, so that reconnect episodes play out in
	// well under a second: 20, 40, 80, 160, 200 ms.
	Reconnect: ReconnectPolicy{InitialDelay: Duration(20 * time.Millisecond), MaxDelay: Duration(200 * time.Millisecond)},
}

// start runs a Supervisor for the test and closes it at the end, checking
// that no server process survives.
func start(t *testing.T, opts Options) *Supervisor {
	t.Helper()
	s, err := Start(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		pids := serverPids(s)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, s.Close(ctx))
		for _, pid := range pids {
			assert.Empty(t, stdiotest.WaitGroupGone(pid, 3*time.Second), "process group %d must be gone after Close", pid)
		}
	})
	return s
}

// serverPids returns the process ids of the ready stdio servers.
func serverPids(s *Supervisor) []int {
	var pids []int
	for _, h := range *s.handles.Load() {
		if v := h.view.Load(); v.sess != nil {
			if c, ok := v.sess.Conn().(*stdiot.Conn); ok {
				pids = append(pids, c.Pid())
			}
		}
	}
	return pids
}

func setAndSettle(t *testing.T, s *Supervisor, servers map[string]ServerConfig) SetResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.SetServers(ctx, servers)
	require.NoError(t, err)
	require.NoError(t, s.WaitSettled(ctx))
	return res
}

func statusOf(s *Supervisor, name string) ServerStatus {
	for _, st := range s.Status() {
		if st.Name == name {
			return st
		}
	}
	return ServerStatus{}
}

func TestServersConnectAndToolsArePooled(t *testing.T) {
	s := start(t, testOptions)
	res := setAndSettle(t, s, map[string]ServerConfig{
		"alpha":      mock("-name", "alpha"),
		"beta":       mock("-name", "beta", "-versions", "2025-06-18"),
		"odd name!":  mock("-tools", "2"),
		"turned-off": {Config: mockserver.Command(), Disabled: true},
	})
	assert.Equal(t, []string{"alpha", "beta", "odd name!", "turned-off"}, res.Added)
	assert.Empty(t, res.Errors)

	st := s.Status()
	require.Len(t, st, 4)
	for _, name := range []string{"alpha", "beta", "odd name!"} {
		assert.Equal(t, StateReady, statusOf(s, name).State, name)
	}
	assert.Equal(t, protocol.Version20260728, statusOf(s, "alpha").ProtocolVersion)
	assert.Equal(t, protocol.Version20250618, statusOf(s, "beta").ProtocolVersion)
	assert.Equal(t, "beta", statusOf(s, "beta").ServerInfo.Name)
	assert.Equal(t, StateDisabled, statusOf(s, "turned-off").State)

	names := map[string]bool{}
	for _, tool := range s.Tools() {
		names[tool.Name] = true
	}
	assert.True(t, names["mcp__alpha__echo"])
	assert.True(t, names["mcp__beta__add"])
	assert.True(t, names["mcp__odd_name___tool_002"], "characters outside [A-Za-z0-9_-] become _")
	assert.Len(t, names, 5*2+7, "disabled servers offer nothing")

	out, err := s.CallTool(context.Background(), "mcp__beta__add", json.RawMessage(`{"a":1,"b":2}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"sum":3}`, string(out.StructuredContent))
}

func TestConnectAdmissionHonoursTheLocalLimit(t *testing.T) {
	opts := testOptions
	opts.LocalConnectLimit = 3
	s := start(t, opts)
	servers := map[string]ServerConfig{}
	for i := range 10 {
		servers[fmt.Sprintf("s%02d", i)] = mock("-init-delay", "150ms")
	}
	began := time.Now()
	setAndSettle(t, s, servers)
	elapsed := time.Since(began)
	stats, err := s.reg.admissionStats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 3, stats.Peak[admission.Local], "never more than the limit at once, and the limit is used")
	assert.Zero(t, stats.Running[admission.Local])
	for _, st := range s.Status() {
		assert.Equal(t, StateReady, st.State, st.Name)
	}
	t.Logf("10 servers, 150 ms handshake each, 3 at a time: all ready in %v", elapsed)
}

func TestAFailingServerDoesNotHoldBackTheOthers(t *testing.T) {
	t.Parallel()
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{
		"good":     plain(),
		"missing":  {Config: transports.Config{Command: "mcpvisor-no-such-server"}},
		"crashes":  mock("-exit-at-start"),
		"bad-cwd":  {Config: transports.Config{Command: "cat", Cwd: "/no/such/dir"}},
		"not-json": {Config: transports.Config{Command: "/bin/sh", Args: []string{"-c", "echo hello; sleep 0.2"}}},
	})
	assert.Equal(t, StateReady, statusOf(s, "good").State)
	// A config that cannot work parks at once; a server that dies while
	// connecting is tried again until the episode's budget is spent.
	for name, want := range map[string]string{
		"missing":  "executable file not found",
		"crashes":  "gave up after 6 reconnect attempts: connect",
		"bad-cwd":  "/no/such/dir",
		"not-json": "gave up after 6 reconnect attempts: connect",
	} {
		require.Eventually(t, func() bool { return statusOf(s, name).State == StateFailed }, 10*time.Second, 10*time.Millisecond, name)
		st := statusOf(s, name)
		assert.Contains(t, st.LastError, want, name)
	}
	assert.Equal(t, FailureConfig, statusOf(s, "missing").LastFailure)
	assert.Equal(t, FailureConfig, statusOf(s, "bad-cwd").LastFailure)
	assert.Equal(t, FailureClosed, statusOf(s, "crashes").LastFailure)
	assert.Equal(t, 6, statusOf(s, "crashes").Attempt)

	// A failed server offers no tools, but a call by one of its names
	// says why (woken for one attempt, which fails too), rather than
	// "unknown tool".
	_, err := s.CallTool(context.Background(), "mcp__crashes__echo", nil)
	var nre *NotReadyError
	require.ErrorAs(t, err, &nre, "a failed server's name is not an unknown tool")
	assert.Equal(t, StateFailed, nre.State)
	assert.NotErrorIs(t, err, ErrUnknownTool)
	_, err = s.Resources().Read(context.Background(), "crashes", "mock://x")
	require.ErrorAs(t, err, &nre)
	assert.ErrorIs(t, err, ErrServerNotReady)
	assert.Equal(t, StateFailed, nre.State)
}

func TestInvalidConfigIsReportedAndNotStarted(t *testing.T) {
	s := start(t, testOptions)
	res := setAndSettle(t, s, map[string]ServerConfig{
		"ok":      plain(),
		"nothing": {},
		"weird":   {Config: transports.Config{Type: "carrier-pigeon", URL: "x"}},
		"pinned":  {Config: mockserver.Command(), ProtocolVersion: "1999-01-01"},
	})
	assert.Equal(t, []string{"ok"}, res.Added)
	assert.Len(t, res.Errors, 3)
	assert.Contains(t, res.Errors["weird"].Error(), "carrier-pigeon")
	assert.Len(t, s.Status(), 1)
}

func TestDeadProcessFailsInFlightCallsAndIsRestartedAtOnce(t *testing.T) {
	s := start(t, testOptions)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 64)
	setAndSettle(t, s, map[string]ServerConfig{"flaky": mock("-exit-after", "1"), "steady": plain()})
	firstPid := pidOf(s, "flaky")

	_, err := s.CallTool(context.Background(), "mcp__flaky__echo", json.RawMessage(`{"text":"a"}`))
	require.NoError(t, err)
	_, err = s.CallTool(context.Background(), "mcp__flaky__echo", json.RawMessage(`{"text":"b"}`))
	require.ErrorIs(t, err, session.ErrConnectionClosed)
	var lost *ConnectionLostError
	require.ErrorAs(t, err, &lost, "the in-flight call fails with a typed error")
	assert.Equal(t, "flaky", lost.Server)
	assert.Equal(t, 1, lost.Attempt, "the loss starts the episode's first reconnect")
	var pe *stdiot.ProcessExitError
	// Even when a write (the call's, or a re-list the session sends on its
	// own) meets the closed pipe before the exit is seen.
	assert.ErrorAs(t, err, &pe, "the error says how the process ended: %v", err)

	// The process exit is not a strike: the server is restarted at once
	// (no backoff), and its tools stay in the pool meanwhile.
	res, err := s.CallTool(context.Background(), "mcp__flaky__echo", json.RawMessage(`{"text":"c"}`))
	require.NoError(t, err, "a call made while the server restarts waits for it")
	assert.Equal(t, "c", res.Content[0].Text)
	assert.NotEqual(t, firstPid, pidOf(s, "flaky"))
	st := statusOf(s, "flaky")
	assert.Equal(t, StateReady, st.State)
	assert.Equal(t, 1, st.Attempt, "one reconnect in this episode")
	_, err = s.CallTool(context.Background(), "mcp__steady__echo", json.RawMessage(`{"text":"d"}`))
	assert.NoError(t, err, "the other server is unaffected")
	assert.True(t, hasTool(s, "mcp__flaky__echo"))

	var seen []string
	deadline := time.After(5 * time.Second)
	for len(seen) < 6 {
		select {
		case ev := <-events:
			if ev.Type == EventServerState && ev.Server == "flaky" {
				seen = append(seen, string(ev.State))
			}
		case <-deadline:
			t.Fatalf("events so far: %v", seen)
		}
	}
	assert.Equal(t, []string{"pending", "connecting", "ready", "pending", "connecting", "ready"}, seen[:6])
}

func TestCallsHaveADefaultDeadline(t *testing.T) {
	s := start(t, testOptions)
	slow := mock("-hang-on-call")
	slow.TimeoutMs = 100
	setAndSettle(t, s, map[string]ServerConfig{"slow": slow})
	began := time.Now()
	_, err := s.CallTool(context.Background(), "mcp__slow__echo", nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, session.ErrTimeout)
	assert.Less(t, time.Since(began), 3*time.Second)
}

func TestSetServersAppliesADiff(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"keep": plain(), "drop": plain(), "change": plain()})
	keepSince := statusOf(s, "keep").ConnectedSince
	dropPid := pidOf(s, "drop")
	changePid := pidOf(s, "change")

	res := setAndSettle(t, s, map[string]ServerConfig{"keep": plain(), "change": mock("-tools", "1"), "new": plain()})
	assert.Equal(t, []string{"new"}, res.Added)
	assert.Equal(t, []string{"drop"}, res.Removed)
	assert.Equal(t, []string{"change"}, res.Changed)
	assert.Equal(t, []string{"keep"}, res.Unchanged)

	assert.Equal(t, keepSince, statusOf(s, "keep").ConnectedSince, "unchanged servers are not touched")
	assert.Equal(t, 6, statusOf(s, "change").ToolCount, "the changed server reconnected with its new config")
	assert.NotEqual(t, changePid, pidOf(s, "change"))
	assert.Empty(t, stdiotest.WaitGroupGone(dropPid, 5*time.Second), "a removed server's processes are gone")
	assert.Empty(t, stdiotest.WaitGroupGone(changePid, 5*time.Second), "a replaced process is gone")
	assert.Len(t, s.Status(), 3)
}

func pidOf(s *Supervisor, name string) int {
	h, err := s.handle(name)
	if err != nil {
		return 0
	}
	if v := h.view.Load(); v.sess != nil {
		if c, ok := v.sess.Conn().(*stdiot.Conn); ok {
			return c.Pid()
		}
	}
	return 0
}

func TestReconnect(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"a": plain(), "missing": {Config: transports.Config{Command: "mcpvisor-no-such-server"}}})
	pid := pidOf(s, "a")

	require.NoError(t, s.Server("a").Reconnect(context.Background()))
	require.Eventually(t, func() bool { return statusOf(s, "a").State == StateReady && pidOf(s, "a") != pid }, 10*time.Second, 10*time.Millisecond,
		"a ready server is reconnected: a new process")
	_, err := s.CallTool(context.Background(), "mcp__a__echo", nil)
	assert.NoError(t, err)

	// A parked server gets one more attempt.
	h, err := s.handle("missing")
	require.NoError(t, err)
	gen := h.view.Load().gen
	require.NoError(t, s.Server("missing").Reconnect(context.Background()))
	require.Eventually(t, func() bool { v := h.view.Load(); return v.gen > gen && v.state == StateFailed }, 10*time.Second, 10*time.Millisecond)

	assert.ErrorIs(t, s.Server("nope").Reconnect(context.Background()), ErrUnknownServer)
}

// testwait:ok: it runs in a synctest bubble, whose sleeps and synctest.Wait
// are on the fake clock; a bubble that can never move on fails as a deadlock.
func TestListChangedUpdatesThePool(t *testing.T) {
	inBubble(t, testOptions, map[string]mockserver.Options{"dyn": {}}, func(t *testing.T, s *Supervisor) {
		events := s.reg.subscribeRecords(t.Context(), false, 0, 64)
		settleInBubble(t, s, map[string]ServerConfig{"dyn": inProcess()})
		_, err := s.CallTool(context.Background(), "mcp__dyn__announce", json.RawMessage(`{"text":"late_tool"}`))
		require.NoError(t, err)
		synctest.Wait() // the re-list, and the registry's flush
		assert.True(t, hasTool(s, "mcp__dyn__late_tool"), "the announced tool joins the pool without any call from the host")
		found := false
		for !found {
			select {
			case ev := <-events:
				found = ev.Type == EventToolsChanged && ev.Server == "dyn"
			case <-time.After(5 * time.Second):
				t.Fatal("no tools_changed event")
			}
		}
	})
}

func TestPromptsAndResources(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"r": mock("-resources", "2", "-prompts", "1")})
	rs, ts, err := s.Resources().List("")
	require.NoError(t, err)
	assert.Len(t, rs, 2)
	assert.Len(t, ts, 1)
	assert.Equal(t, "r", rs[0].Server)
	out, err := s.Resources().Read(context.Background(), "r", rs[1].Resource.URI)
	require.NoError(t, err)
	assert.Equal(t, "contents of mock://resource/2", out.Contents[0].Text)

	prompts, err := s.Prompts().List("")
	require.NoError(t, err)
	require.Len(t, prompts, 1)
	assert.Equal(t, "mcp__r__prompt_1", prompts[0].Name)
	gp, err := s.Prompts().Get(context.Background(), prompts[0].Name, map[string]string{"name": "x"})
	require.NoError(t, err)
	assert.Len(t, gp.Messages, 1)
	_, err = s.Prompts().Get(context.Background(), "mcp__r__nope", nil)
	assert.ErrorIs(t, err, ErrUnknownPrompt)
	_, _, err = s.Resources().List("nope")
	assert.ErrorIs(t, err, ErrUnknownServer)
}

func TestToolFilter(t *testing.T) {
	s := start(t, testOptions)
	cfg := mock("-tools", "3")
	cfg.Tools = ToolFilter{Allow: []string{"tool_*", "echo"}, Deny: []string{"tool_002"}}
	setAndSettle(t, s, map[string]ServerConfig{"f": cfg})
	var names []string
	for _, tool := range s.Tools() {
		names = append(names, tool.Name)
	}
	assert.Equal(t, []string{"mcp__f__echo", "mcp__f__tool_001", "mcp__f__tool_003"}, names)
}

func TestCloseEndsInFlightCallsAndEveryProcess(t *testing.T) {
	s, err := Start(context.Background(), testOptions)
	require.NoError(t, err)
	setAndSettle(t, s, map[string]ServerConfig{
		"hang":      mock("-hang-on-call"),
		"stubborn":  mock("-ignore-sigterm"),
		"spawner":   mock("-grandchild"),
		"plain":     plain(),
		"plain-too": plain(),
	})
	pids := serverPids(s)
	require.Len(t, pids, 5)
	errs := make(chan error, 1)
	go func() {
		_, err := s.CallTool(context.Background(), "mcp__hang__echo", nil)
		errs <- err
	}()
	require.Eventually(t, func() bool { return statusOf(s, "hang").InFlight == 1 }, 5*time.Second, 5*time.Millisecond)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 64)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, s.Close(ctx))
	select {
	case err := <-errs:
		assert.ErrorIs(t, err, session.ErrConnectionClosed)
	case <-time.After(time.Second):
		t.Fatal("the in-flight call did not end with Close")
	}
	for _, pid := range pids {
		assert.Empty(t, stdiotest.WaitGroupGone(pid, 3*time.Second), "no process, child or grandchild, survives Close")
	}
	for _, st := range s.Status() {
		assert.Equal(t, StateStopped, st.State, st.Name)
	}
	for range events {
	} // the subscription ends with the supervisor
	_, err = s.SetServers(context.Background(), nil)
	assert.ErrorIs(t, err, ErrClosed)
	assert.NoError(t, s.Close(context.Background()), "Close is idempotent")
}

func TestSubscribeResumesFromASequenceNumber(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"a": plain(), "b": plain()})
	ctx, cancel := context.WithCancel(context.Background())
	all := collect(s.reg.subscribeRecords(ctx, true, 0, 64), 50*time.Millisecond)
	cancel()
	require.NotEmpty(t, all)
	for i, ev := range all {
		assert.Equal(t, uint64(i+1), ev.Seq, "sequence numbers start at 1 and have no holes")
	}
	mid := all[len(all)/2].Seq
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	rest := collect(s.reg.subscribeRecords(ctx2, true, mid, 64), 50*time.Millisecond)
	require.NotEmpty(t, rest)
	assert.Equal(t, mid+1, rest[0].Seq)
	assert.Equal(t, all[len(all)-1].Seq, rest[len(rest)-1].Seq)
}

func TestSlowSubscriberLosesOnlyCountedEvents(t *testing.T) {
	s := start(t, testOptions)
	slow := s.reg.subscribeRecords(t.Context(), false, 0, 2)
	servers := map[string]ServerConfig{}
	for i := range 4 {
		servers[fmt.Sprintf("s%d", i)] = plain()
	}
	setAndSettle(t, s, servers) // ≥ 16 events into a buffer of 2
	got := collect(slow, 500*time.Millisecond)
	require.Len(t, got, 3, "two events filled the buffer; once there was room, a gap marker said what was lost")
	assert.Equal(t, EventServerState, got[1].Type)
	assert.Equal(t, EventGap, got[2].Type)

	var delivered, dropped uint64
	for _, ev := range got {
		if ev.Type == EventGap {
			dropped += ev.Dropped
		} else {
			delivered++
		}
	}
	total := collect(s.reg.subscribeRecords(t.Context(), true, 0, 1024), 50*time.Millisecond)
	assert.Greater(t, dropped, uint64(0))
	assert.Equal(t, uint64(len(total)), delivered+dropped, "every event is either delivered or counted as dropped")
}

func collect(ch <-chan eventRecord, idle time.Duration) []eventRecord {
	var out []eventRecord
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, ev)
		case <-time.After(idle):
			return out
		}
	}
}

func TestConcurrentCallsAcrossServers(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"a": mock("-latency", "1ms"), "b": mock("-latency", "1ms")})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tool := []string{"mcp__a__echo", "mcp__b__echo"}[g%2]
			for i := range 25 {
				text := fmt.Sprintf("%d-%d", g, i)
				out, err := s.CallTool(context.Background(), tool, json.RawMessage(`{"text":"`+text+`"}`))
				if assert.NoError(t, err) {
					assert.Equal(t, text, out.Content[0].Text)
				}
			}
		}()
	}
	testwait.Call(t, "every caller's 25 calls", wg.Wait)
}

// Removing a server always ends its event history with "stopped", even
// when protoactor's Terminated notice overtakes the actor's last view.
func TestRemovedServerAlwaysReportsStopped(t *testing.T) {
	t.Parallel()
	s := start(t, testOptions)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 1024)
	for i := range 10 {
		name := fmt.Sprintf("gone%d", i)
		setAndSettle(t, s, map[string]ServerConfig{name: plain()})
		setAndSettle(t, s, nil)
		deadline := time.After(5 * time.Second)
		for stopped := false; !stopped; {
			select {
			case ev := <-events:
				stopped = ev.Type == EventServerState && ev.Server == name && ev.State == StateStopped
				if stopped {
					assert.Equal(t, StateReady, ev.Previous)
				}
			case <-deadline:
				t.Fatalf("no stopped event for %s", name)
			}
		}
	}
	assert.Empty(t, s.Status())
}

// The library reads no environment variable: the connect limits and
// deadlines of Claude Code's variables are the command's to apply.
func TestOptionsIgnoreTheEnvironment(t *testing.T) {
	t.Setenv("MCP_SERVER_CONNECTION_BATCH_SIZE", "7")
	t.Setenv("MCP_REMOTE_SERVER_CONNECTION_BATCH_SIZE", "40")
	t.Setenv("MCP_TIMEOUT", "1")
	t.Setenv("MCP_TOOL_TIMEOUT", "1")
	o := Options{}.withDefaults()
	assert.Equal(t, 3, o.LocalConnectLimit)
	assert.Equal(t, 20, o.RemoteConnectLimit)
	assert.Equal(t, 30*time.Second, o.ConnectTimeout)
	assert.Equal(t, 100_000_000*time.Millisecond, o.CallTimeout)
	assert.Equal(t, 2*time.Minute, o.RequestTimeout)
}
