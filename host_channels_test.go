package mcpvisor

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/channels"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// A channel server pushes 10,000 messages to three subscribers, one of
// which does not read until the burst is over: the fast ones get every
// message in order, the slow one the newest 1,000 and the count of the
// others; the server actor is never held up (a call made during the burst
// is answered while the slow subscriber still reads nothing).
func TestChannelBurstToThreeSubscribers(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"ch": mock("-channel")})
	const n = 10_000
	fast := []*channels.Inbox{s.Channels().subscribeChannels(t.Context(), n), s.Channels().subscribeChannels(t.Context(), n)}
	slow := s.Channels().subscribeChannels(t.Context(), 0) // default capacity 1,000

	var wg sync.WaitGroup
	got := make([][]string, len(fast))
	for i, in := range fast {
		wg.Go(func() {
			for len(got[i]) < n {
				m, err := in.Wait(t.Context(), nil)
				if !assert.NoError(t, err) {
					return
				}
				got[i] = append(got[i], m.Content)
			}
		})
	}
	res, err := s.CallTool(t.Context(), "mcp__ch__channel_burst", json.RawMessage(`{"n":10000,"prefix":"m"}`))
	require.NoError(t, err)
	require.Equal(t, "pushed 10000", res.Content[0].Text)
	// The actor is free: another call is answered with 10,000 messages
	// published and the slow inbox unread.
	_, err = s.CallTool(t.Context(), "mcp__ch__echo", json.RawMessage(`{"text":"still here"}`))
	require.NoError(t, err)
	testwait.Call(t, "every inbox to get the 10,000 messages", wg.Wait)
	want := make([]string, n)
	for i := range want {
		want[i] = "m" + strconv.Itoa(i+1)
	}
	for i := range fast {
		require.Equal(t, want, got[i], "fast subscriber %d gets all, in order", i)
		assert.Zero(t, fast[i].Dropped())
	}
	require.Eventually(t, func() bool { return slow.Stats().Received == n }, 10*time.Second, 5*time.Millisecond)
	st := slow.Stats()
	assert.Equal(t, uint64(n-1000), st.Dropped)
	assert.Equal(t, 1000, st.Queued)
	for i := n - 1000; i < n; i++ {
		m, err := slow.Wait(t.Context(), nil)
		require.NoError(t, err)
		require.Equal(t, want[i], m.Content, "the slow subscriber keeps the newest")
		require.Equal(t, "ch", m.Server)
		require.Equal(t, map[string]string{"i": strconv.Itoa(i + 1)}, m.Meta)
	}
	assert.Equal(t, `<channel source="ch" i="10000">m10000</channel>`, channels.Render(channels.Message{Server: "ch", Content: want[n-1], Meta: map[string]string{"i": "10000"}}))
}

// Channel messages from a server that did not declare claude/channel are
// dropped.
func TestChannelNeedsTheCapability(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"plain": mock("-notify-tool"), "ch": mock("-notify-tool", "-channel")})
	in := s.Channels().subscribeChannels(t.Context(), 0)
	for _, srv := range []string{"plain", "ch"} {
		_, err := s.CallTool(t.Context(), "mcp__"+srv+"__notify", json.RawMessage(`{"method":"notifications/claude/channel","params":{"content":"from `+srv+`"}}`))
		require.NoError(t, err)
	}
	m, err := in.Wait(t.Context(), nil)
	require.NoError(t, err)
	assert.Equal(t, "from ch", m.Content)
	_, ok := in.TryTake(nil)
	assert.False(t, ok)
}

// The host relays a permission prompt to its channel servers; one answers
// by short ID. A verdict for a wrong ID changes nothing; a prompt nobody
// answers expires; answering it then is refused.
func TestPermissionRelayRoundTrip(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"tg": mock("-channel", "-notify-tool"), "plain": plain()})
	in := s.Channels().subscribeChannels(t.Context(), 0)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)

	p, sent, err := s.Channels().requestPermission(t.Context(), channels.PermissionRequest{ToolName: "Bash", Description: "run the tests", InputPreview: `{"command":"go test ./..."}`}, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"tg"}, sent, "only servers declaring claude/channel/permission get it")
	// The channel server got it (it echoes prompts as channel messages).
	m, err := in.Wait(t.Context(), nil)
	require.NoError(t, err)
	assert.Equal(t, "approve Bash? reply yes "+p.ID, m.Content)
	assert.Equal(t, p.ID, m.Meta["request_id"])

	verdict := func(id, behavior string) {
		t.Helper()
		args := fmt.Sprintf(`{"method":%q,"params":{"request_id":%q,"behavior":%q}}`, protocol.NotificationChannelPermission, id, behavior)
		_, err := s.CallTool(t.Context(), "mcp__tg__notify", json.RawMessage(args))
		require.NoError(t, err)
	}
	verdict("qqqqq", "allow") // a wrong ID: dropped
	verdict(p.ID, "deny")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	a, err := p.Wait(ctx)
	require.NoError(t, err)
	assert.False(t, a.Allow)
	assert.Equal(t, "tg", a.By)
	ev := nextEvent(t, events, EventPermissionAnswered, "tg")
	assert.Equal(t, p.ID, ev.PermissionID)
	assert.ErrorIs(t, s.Channels().answerPermission(t.Context(), p.ID, true), ErrPermissionAnswered, "the first answer applies")
	assert.ErrorIs(t, s.Channels().answerPermission(t.Context(), "zzzzz", true), ErrUnknownPermission)

	// Unanswered: it expires.
	q, _, err := s.Channels().requestPermission(t.Context(), channels.PermissionRequest{ToolName: "Write"}, 200*time.Millisecond)
	require.NoError(t, err)
	_, err = q.Wait(t.Context())
	assert.ErrorIs(t, err, ErrPermissionExpired)
	assert.ErrorIs(t, s.Channels().answerPermission(t.Context(), q.ID, true), ErrPermissionExpired)

	// The host answers one itself (the local dialog won the race).
	r, _, err := s.Channels().requestPermission(t.Context(), channels.PermissionRequest{ToolName: "Edit"}, 0)
	require.NoError(t, err)
	require.NoError(t, s.Channels().answerPermission(t.Context(), r.ID, true))
	a, err = r.Wait(t.Context())
	require.NoError(t, err)
	assert.True(t, a.Allow)
	assert.Empty(t, a.By)
}

// A channel server asking the host for a verdict gets a short ID; the
// host's answer by that ID reaches the server with the server's own
// request id.
func TestPermissionRequestFromAServer(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"tg": mock("-channel", "-notify-tool")})
	in := s.Channels().subscribeChannels(t.Context(), 0)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	_, err := s.CallTool(t.Context(), "mcp__tg__notify", json.RawMessage(`{"method":"notifications/claude/channel/permission_request","params":{"request_id":"srv-7","tool_name":"deploy"}}`))
	require.NoError(t, err)
	ev := nextEvent(t, events, EventPermissionRequest, "tg")
	require.Len(t, ev.PermissionID, channels.IDLength)
	assert.ErrorIs(t, s.Channels().answerPermission(t.Context(), "abcdz", true), ErrUnknownPermission)
	require.NoError(t, s.Channels().answerPermission(t.Context(), ev.PermissionID, true))
	m, err := in.Wait(t.Context(), channels.FromServer("tg"))
	require.NoError(t, err)
	assert.Equal(t, "verdict srv-7 allow", m.Content, "the server got its own id back")
}

// A channel server may push as soon as it has answered tools/list, while
// its other lists are still on their way and its connection is not yet
// installed: those messages are kept and delivered once it is, in order,
// none lost.
func TestChannelMessagesPushedDuringConnectAreKept(t *testing.T) {
	s := start(t, testOptions)
	in := s.Channels().subscribeChannels(t.Context(), 0)
	const n = 500
	// Many resources and prompts make the lists after tools/list slow
	// enough for the pushes to arrive first.
	setAndSettle(t, s, map[string]ServerConfig{"ch": mock("-channel", "-channel-at-start", strconv.Itoa(n), "-resources", "3000", "-prompts", "3000")})
	require.Eventually(t, func() bool { return in.Stats().Received == n }, 10*time.Second, 5*time.Millisecond,
		"all %d messages pushed during the connect reach the inbox", n)
	assert.Zero(t, in.Dropped())
	ms := in.TakeN(nil, n)
	require.Len(t, ms, n)
	for i, m := range ms {
		require.Equal(t, "start"+strconv.Itoa(i+1), m.Content, "in order")
	}
}
