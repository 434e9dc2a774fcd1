package mcpvisor

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// nextEvent returns the next event of type typ for server, skipping
// others.
func nextEvent(t *testing.T, events <-chan eventRecord, typ EventType, server string) eventRecord {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "the subscription ended before a %s event for %s", typ, server)
			if ev.Type == typ && ev.Server == server {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event for %s", typ, server)
		}
	}
}

func TestListChangedPublishesTheDiff(t *testing.T) {
	s := start(t, testOptions)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	setAndSettle(t, s, map[string]ServerConfig{"dyn": plain()})
	first := nextEvent(t, events, EventToolsChanged, "dyn")
	assert.Len(t, first.Diff.Added, plainTools, "connecting adds the server's tools: %v", first.Diff)

	_, err := call(t, s, "mcp__dyn__announce", "late_tool")
	require.NoError(t, err)
	ev := nextEvent(t, events, EventToolsChanged, "dyn")
	assert.Equal(t, &ListDiff{Added: []string{"mcp__dyn__late_tool"}}, ev.Diff)
	assert.True(t, hasTool(s, "mcp__dyn__late_tool"), "the pool already has it when the event arrives")

	// A burst of list_changed: every tool arrives, with at most one re-list
	// in flight, and each diff names only what is new.
	for i := range 10 {
		_, err := call(t, s, "mcp__dyn__announce", fmt.Sprintf("burst_%d", i))
		require.NoError(t, err)
	}
	added := map[string]bool{}
	for len(added) < 10 {
		ev := nextEvent(t, events, EventToolsChanged, "dyn")
		assert.Empty(t, ev.Diff.Removed)
		for _, name := range ev.Diff.Added {
			assert.False(t, added[name], "%s added twice", name)
			added[name] = true
		}
	}
}

func TestReconnectPublishesOnlyWhatChanged(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"m": mock("-exit-after", "1")})
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	_, err := call(t, s, "mcp__m__announce", "gone_after_restart")
	require.NoError(t, err)
	nextEvent(t, events, EventToolsChanged, "m")
	_, err = call(t, s, "mcp__m__echo", "dies") // the second call kills it
	require.Error(t, err)
	waitForState(t, events, "m", StateReady, 10*time.Second)
	ev := nextEvent(t, events, EventToolsChanged, "m")
	assert.Equal(t, &ListDiff{Removed: []string{"mcp__m__gone_after_restart"}}, ev.Diff,
		"the restarted server no longer has the announced tool; everything else is unchanged")
}

func TestToggleHidesAServerButKeepsItsConnection(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"t": mock("-resources", "1", "-prompts", "1"), "other": plain()})
	pid := pidOf(s, "t")
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)

	require.NoError(t, s.Server("t").Toggle(context.Background(), false))
	ev := nextEvent(t, events, EventServerToggled, "t")
	assert.True(t, ev.ToggledOff)
	diff := nextEvent(t, events, EventToolsChanged, "t")
	assert.Len(t, diff.Diff.Removed, 5)
	assert.False(t, hasTool(s, "mcp__t__echo"))
	assert.True(t, hasTool(s, "mcp__other__echo"))
	_, err := call(t, s, "mcp__t__echo", "x")
	assert.ErrorIs(t, err, ErrServerOff, "a call to a toggled-off server is refused, not reported unknown")
	_, _, err = s.Resources().List("t")
	assert.ErrorIs(t, err, ErrServerOff)
	rs, _, err := s.Resources().List("")
	require.NoError(t, err)
	assert.Empty(t, rs, "its resources are hidden")
	prompts, err := s.Prompts().List("")
	require.NoError(t, err)
	assert.Empty(t, prompts, "its prompts are hidden")
	_, err = s.Resources().Read(context.Background(), "t", "mock://resource/1")
	assert.ErrorIs(t, err, ErrServerOff)
	assert.True(t, statusOf(s, "t").ToggledOff)
	assert.Equal(t, StateReady, statusOf(s, "t").State, "the connection is kept")

	require.NoError(t, s.Server("t").Toggle(context.Background(), true))
	ev = nextEvent(t, events, EventServerToggled, "t")
	assert.False(t, ev.ToggledOff)
	assert.Len(t, nextEvent(t, events, EventToolsChanged, "t").Diff.Added, 5)
	out, err := call(t, s, "mcp__t__echo", "back")
	require.NoError(t, err)
	assert.Equal(t, "back", out.Content[0].Text)
	assert.Equal(t, pid, pidOf(s, "t"), "the same process served it throughout")

	assert.ErrorIs(t, s.Server("nope").Toggle(context.Background(), false), ErrUnknownServer)
	setAndSettle(t, s, map[string]ServerConfig{"t": {Config: plain().Config, Disabled: true}})
	assert.Error(t, s.Server("t").Toggle(context.Background(), true), "a server disabled in config cannot be toggled on")
}

func TestAChangeThatKeepsTheConnectionIsAppliedWithoutReconnecting(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"m": plain()})
	pid := pidOf(s, "m")
	filtered := plain()
	filtered.Tools = ToolFilter{Deny: []string{"fail", "sleep"}}
	filtered.Trust = "trusted"
	res := setAndSettle(t, s, map[string]ServerConfig{"m": filtered})
	assert.Equal(t, []string{"m"}, res.Changed)
	assert.Empty(t, res.Reconnected, "a filter and trust change keeps the connection")
	require.Eventually(t, func() bool { return !hasTool(s, "mcp__m__fail") }, 5*time.Second, 10*time.Millisecond)
	assert.True(t, hasTool(s, "mcp__m__echo"))
	assert.Equal(t, pid, pidOf(s, "m"))

	res = setAndSettle(t, s, map[string]ServerConfig{"m": mock("-tools", "1")})
	assert.Equal(t, []string{"m"}, res.Reconnected, "new args need a new process")
	assert.NotEqual(t, pid, pidOf(s, "m"))
}

// A single supervisor ignores a server's cluster placement (Nodes): a
// change of it alone leaves the server unchanged, and its discovery cache
// key (ConfigHash) the same. (The engine once saw only a copy of the
// config without Nodes; now that it takes the host's ServerConfig, it
// must leave Nodes out itself.)
func TestNodesAloneChangeNothing(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"m": plain()})
	pid := pidOf(s, "m")
	placed := plain()
	placed.Nodes = map[string]string{"cmd": "uvx"}
	res := setAndSettle(t, s, map[string]ServerConfig{"m": placed})
	assert.Equal(t, []string{"m"}, res.Unchanged)
	assert.Empty(t, res.Changed)
	assert.Equal(t, pid, pidOf(s, "m"))
	assert.Equal(t, ConfigHash(plain()), ConfigHash(placed))
}

func TestALazyServerConnectsOnFirstUse(t *testing.T) {
	s := start(t, testOptions)
	lazy := plain()
	lazy.Lazy = true
	setAndSettle(t, s, map[string]ServerConfig{"lazy": lazy, "eager": plain()})
	assert.Equal(t, StatePending, statusOf(s, "lazy").State, "not connected by SetServers")
	assert.False(t, hasTool(s, "mcp__lazy__echo"), "its tools are unknown until it connects")

	out, err := call(t, s, "mcp__lazy__echo", "woke")
	require.NoError(t, err, "a call naming one of its tools connects it and is sent")
	assert.Equal(t, "woke", out.Content[0].Text)
	assert.Equal(t, StateReady, statusOf(s, "lazy").State)
	assert.True(t, hasTool(s, "mcp__lazy__echo"))

	_, err = call(t, s, "mcp__eager__no_such_tool", "x")
	assert.ErrorIs(t, err, ErrUnknownTool)
	lazy2 := plain()
	lazy2.Lazy = true
	setAndSettle(t, s, map[string]ServerConfig{"lazy": lazy, "eager": plain(), "lazy2": lazy2})
	_, err = call(t, s, "mcp__lazy2__no_such_tool", "x")
	assert.ErrorIs(t, err, ErrUnknownTool, "a lazy server without the tool says so once connected")
	assert.Equal(t, StateReady, statusOf(s, "lazy2").State)
}

func TestBuiltinsAreOfferedFirstAndRouted(t *testing.T) {
	opts := testOptions
	opts.Builtins = []BuiltinTool{
		{Definition: protocol.Tool{Name: "Bash", Description: "Runs a command."}, Call: func(ctx context.Context, args json.RawMessage) (*protocol.CallToolResult, error) {
			return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent("ran " + string(args))}}, nil
		}},
		{Definition: protocol.Tool{Name: "AskUser"}}, // the host runs it
	}
	s := start(t, opts)
	setAndSettle(t, s, map[string]ServerConfig{"m": plain()})
	tools := s.Tools()
	require.Len(t, tools, 2+plainTools)
	assert.Equal(t, []string{"AskUser", "Bash"}, []string{tools[0].Name, tools[1].Name})
	assert.True(t, tools[0].Builtin)
	assert.Equal(t, "mcp__m__add", tools[2].Name, "MCP tools follow, sorted")

	out, err := s.CallTool(context.Background(), "Bash", json.RawMessage(`{"cmd":"ls"}`))
	require.NoError(t, err)
	assert.Equal(t, `ran {"cmd":"ls"}`, out.Content[0].Text)
	_, err = s.CallTool(context.Background(), "AskUser", nil)
	assert.ErrorIs(t, err, ErrHostTool)

	_, err = Start(context.Background(), Options{Builtins: []BuiltinTool{{Definition: protocol.Tool{Name: "x"}}, {Definition: protocol.Tool{Name: "x"}}}})
	assert.Error(t, err, "two built-ins with one name are refused")
}

func TestServerNotificationsBecomeEvents(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"n": mock("-notify-tool", "-channel")})
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	notify := func(method, params string) {
		t.Helper()
		args := fmt.Sprintf(`{"method":%q,"params":%s}`, method, params)
		_, err := s.CallTool(context.Background(), "mcp__n__notify", json.RawMessage(args))
		require.NoError(t, err)
	}
	notify(protocol.NotificationResourceUpdated, `{"uri":"mock://resource/1"}`)
	assert.Equal(t, "mock://resource/1", nextEvent(t, events, EventResourceUpdated, "n").URI)
	notify(protocol.NotificationMessage, `{"level":"warning","data":"disk almost full"}`)
	ev := nextEvent(t, events, EventLogMessage, "n")
	assert.Equal(t, "warning", ev.Level)
	var log struct{ Data string }
	require.NoError(t, json.Unmarshal(ev.Data, &log), "Data is the notification's params")
	assert.Equal(t, "disk almost full", log.Data)
	notify(protocol.NotificationChannel, `{"content":"build failed","meta":{"job":"42"}}`)
	var channel struct {
		Content string
		Meta    map[string]string
	}
	require.NoError(t, json.Unmarshal(nextEvent(t, events, EventChannelMessage, "n").Data, &channel))
	assert.Equal(t, "build failed", channel.Content)
	assert.Equal(t, map[string]string{"job": "42"}, channel.Meta)
	notify(protocol.NotificationChannelPermissionRequest, `{"request_id":"r1","tool_name":"Bash"}`)
	nextEvent(t, events, EventPermissionRequest, "n")
	notify(protocol.NotificationProgress, `{"progressToken":"p","progress":1}`)
	nextEvent(t, events, EventProgress, "n")
}

func TestResumingFromAForgottenCursorSaysSo(t *testing.T) {
	opts := testOptions
	opts.EventBuffer = 4
	s := start(t, opts)
	setAndSettle(t, s, map[string]ServerConfig{"a": plain(), "b": plain(), "c": plain()}) // > 4 events
	got := collect(s.reg.subscribeRecords(t.Context(), true, 1, 64), 100*time.Millisecond)
	require.NotEmpty(t, got)
	assert.Equal(t, EventGap, got[0].Type)
	assert.Equal(t, GapCursorTooOld, got[0].GapReason)
	require.Len(t, got, 5, "the gap, then the four events still remembered")
	assert.Equal(t, got[1].Seq-2, got[0].Dropped, "the gap counts exactly the forgotten events after the cursor")
}

// server-everything (the TypeScript SDK's reference server) over stdio
// registers tools around initialize and says so with list_changed: the
// pool shows them, and subscribers get the diffs, without any call.
func TestServerEverythingOverStdioAnnouncesItsTools(t *testing.T) {
	bin := everythingBin(t)
	s := start(t, remoteOptions())
	events := s.reg.subscribeRecords(t.Context(), false, 0, 1024)
	cfg := ServerConfig{}
	cfg.Command, cfg.Args = bin, []string{"stdio"}
	setAndSettle(t, s, map[string]ServerConfig{"everything": cfg})
	require.Equal(t, StateReady, statusOf(s, "everything").State, statusOf(s, "everything").LastError)

	added := map[string]bool{}
	require.Eventually(t, func() bool {
		for {
			select {
			case ev := <-events:
				if ev.Type == EventToolsChanged && ev.Server == "everything" {
					for _, name := range ev.Diff.Added {
						added[name] = true
					}
				}
				continue
			default:
			}
			break
		}
		return len(added) > 0 && len(added) == len(s.Tools())
	}, remoteEventually, remoteTick, "every tool in the pool was announced by a diff")
	assert.True(t, added["mcp__everything__echo"])
	t.Logf("server-everything offers %d tools, all announced by diffs", len(added))
	for _, tool := range s.Tools() {
		assert.LessOrEqual(t, len(tool.Name), MaxNameLength)
	}
	prompts, err := s.Prompts().List("everything")
	require.NoError(t, err)
	assert.NotEmpty(t, prompts)
	rs, _, err := s.Resources().List("everything")
	require.NoError(t, err)
	assert.NotEmpty(t, rs, "resources are listed with their server (every page)")
}

func TestEachServerHasItsOwnConnectDeadline(t *testing.T) {
	s := start(t, testOptions)
	slow := mock("-init-delay", "5s")
	slow.ConnectTimeoutMs = 200
	began := time.Now()
	setAndSettle(t, s, map[string]ServerConfig{"slow": slow, "fine": mock("-init-delay", "300ms")})
	st := statusOf(s, "slow")
	assert.Contains(t, []State{StateReconnecting, StateFailed}, st.State, "a server that misses its connect deadline gets a state saying so; it is not dropped")
	assert.Equal(t, "timeout", st.LastErrorClass, st.LastError)
	assert.Equal(t, StateReady, statusOf(s, "fine").State, "the default deadline of the others is untouched")
	t.Logf("settled in %v", time.Since(began))
}

// A subscriber that stops reading loses only counted events, and gets the
// ones it lost back by resuming from the last sequence number it saw.
func TestASlowSubscriberResumesByCursor(t *testing.T) {
	s := start(t, testOptions)
	ctx, cancel := context.WithCancel(context.Background())
	slow := s.reg.subscribeRecords(ctx, false, 0, 3)
	servers := map[string]ServerConfig{}
	for i := range 6 {
		servers[fmt.Sprintf("s%d", i)] = plain()
	}
	setAndSettle(t, s, servers) // dozens of events into a buffer of 3, unread
	got := collect(slow, 300*time.Millisecond)
	cancel()
	require.Len(t, got, 4, "three events filled the buffer; then a gap said how many were lost")
	gap := got[3]
	require.Equal(t, EventGap, gap.Type)
	assert.Equal(t, GapSlowSubscriber, gap.GapReason)

	last := got[2].Seq
	resumed := collect(s.reg.subscribeRecords(t.Context(), true, last, 1024), 100*time.Millisecond)
	require.NotEmpty(t, resumed)
	assert.Equal(t, last+1, resumed[0].Seq, "resuming starts right after the cursor")
	assert.Len(t, resumed, int(gap.Dropped), "exactly the lost events come back")
	for i, ev := range resumed {
		assert.Equal(t, last+1+uint64(i), ev.Seq, "in order, without holes")
	}
}

// Once used, a lazy server is supervised like any other: a lost
// connection is reconnected without waiting for another call.
// testwait:ok: it runs in a synctest bubble, whose sleeps and synctest.Wait
// are on the fake clock; a bubble that can never move on fails as a deadlock.
func TestAUsedLazyServerIsReconnectedLikeAnyOther(t *testing.T) {
	inBubble(t, testOptions, map[string]mockserver.Options{"lazy": {ExitAfter: 1}}, func(t *testing.T, s *Supervisor) {
		lazy := inProcess()
		lazy.Lazy = true
		settleInBubble(t, s, map[string]ServerConfig{"lazy": lazy})
		_, err := call(t, s, "mcp__lazy__echo", "first use")
		require.NoError(t, err)
		h, err := s.handle("lazy")
		require.NoError(t, err)
		first := h.view.Load().gen
		_, err = call(t, s, "mcp__lazy__echo", "kills it")
		require.Error(t, err)
		time.Sleep(time.Second) // longer than the first backoff delay of testOptions
		synctest.Wait()
		assert.Greater(t, h.view.Load().gen, first, "a new connection, with no call waiting for it")
		assert.Equal(t, StateReady, statusOf(s, "lazy").State)
	})
}

// Toggle and SetServers change the pool before they return: a host that
// acts on their result never sees the old pool.
func TestTheCallerSeesThePoolItChanged(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"a": plain(), "b": plain()})
	for range 50 {
		require.NoError(t, s.Server("a").Toggle(context.Background(), false))
		require.False(t, hasTool(s, "mcp__a__echo"))
		require.NoError(t, s.Server("a").Toggle(context.Background(), true))
		require.True(t, hasTool(s, "mcp__a__echo"))
	}
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	_, err := s.SetServers(context.Background(), map[string]ServerConfig{"a": plain()})
	require.NoError(t, err)
	assert.False(t, hasTool(s, "mcp__b__echo"), "a removed server's tools are gone when SetServers returns")
	// b's shutdown goes on after SetServers returned; its last event
	// says it stopped.
	waitForState(t, events, "b", StateStopped, 10*time.Second)

	seq, err := s.LastSeq(context.Background())
	require.NoError(t, err)
	require.NoError(t, s.Server("a").Toggle(context.Background(), false))
	got := collect(s.reg.subscribeRecords(t.Context(), true, seq, 64), 100*time.Millisecond)
	require.NotEmpty(t, got)
	assert.Equal(t, EventServerToggled, got[0].Type, "resuming from LastSeq shows exactly what followed")
	assert.Equal(t, seq+1, got[0].Seq)
	assert.Equal(t, 0, statusOf(s, "a").OfferedTools)
	assert.Equal(t, plainTools, statusOf(s, "a").ToolCount)
}
