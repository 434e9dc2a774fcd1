package mcpvisor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reconnectAndWait reconnects a server and waits until it is ready on a
// new connection.
func reconnectAndWait(t *testing.T, s *Supervisor, name string) {
	t.Helper()
	h, err := s.handle(name)
	require.NoError(t, err)
	old := h.view.Load().sess
	require.NoError(t, s.Server(name).Reconnect(t.Context()))
	require.Eventually(t, func() bool {
		v := h.view.Load()
		return v.state == StateReady && v.sess != nil && v.sess != old
	}, 15*time.Second, 10*time.Millisecond)
}

func touch(t *testing.T, s *Supervisor, uri string) string {
	t.Helper()
	res, err := s.CallTool(t.Context(), "mcp__m__touch", json.RawMessage(`{"uri":"`+uri+`"}`))
	require.NoError(t, err)
	return res.Content[0].Text
}

// A resource subscription delivers updates, is sent again to the new
// process after a reconnect, and ends with UnsubscribeResource.
func TestResourceSubscriptionSurvivesReconnect(t *testing.T) {
	s := start(t, testOptions)
	cfg := mock("-subscribe", "-resources", "2")
	cfg.ProtocolVersion = "2025-11-25" // resources/subscribe is of the handshake eras
	setAndSettle(t, s, map[string]ServerConfig{"m": cfg})
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	const uri = "mock://resource/1"
	require.NoError(t, s.Resources().Subscribe(t.Context(), "m", uri))
	assert.Equal(t, []string{uri}, s.Resources().Subscriptions("m"))
	assert.Contains(t, touch(t, s, uri), "subscribed: true")
	assert.Equal(t, uri, nextEvent(t, events, EventResourceUpdated, "m").URI)

	reconnectAndWait(t, s, "m") // a new process that knows nothing of the subscription
	require.Eventually(t, func() bool { return strings.Contains(touch(t, s, uri), "subscribed: true") }, 10*time.Second, 20*time.Millisecond,
		"the subscription was restored on the new connection")
	assert.Equal(t, uri, nextEvent(t, events, EventResourceUpdated, "m").URI)

	require.NoError(t, s.Resources().Unsubscribe(t.Context(), "m", uri))
	assert.Empty(t, s.Resources().Subscriptions("m"))
	assert.Contains(t, touch(t, s, uri), "subscribed: false")
}

func TestSubscribeNeedsTheCapability(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"m": mock("-resources", "1")})
	assert.ErrorIs(t, s.Resources().Subscribe(t.Context(), "m", "mock://resource/1"), ErrSubscribeUnsupported)
	assert.Empty(t, s.Resources().Subscriptions("m"))
	assert.ErrorIs(t, s.Resources().Subscribe(t.Context(), "nobody", "x"), ErrUnknownServer)
}

// A polling subscription publishes its first result and then only
// changes; it resumes after a reconnect and stops when unsubscribed.
func TestPollingPublishesChanges(t *testing.T) {
	t.Parallel()
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"m": mock("-subscribe", "-resources", "1")})
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	const uri = "mock://resource/1"
	id, err := s.Polling().Subscribe(PollSpec{Server: "m", URI: uri, Interval: 10 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, MinPollInterval, s.Polling().List()[id].Interval, "raised to the minimum")

	text := func(ev eventRecord) string {
		var r struct {
			Contents []struct{ Text string }
		}
		require.NoError(t, json.Unmarshal(ev.Data, &r))
		return r.Contents[0].Text
	}
	ev := nextEvent(t, events, EventPollChanged, "m")
	assert.Equal(t, id, ev.PollID)
	assert.Equal(t, "contents of "+uri, text(ev))
	time.Sleep(2500 * time.Millisecond) // testwait:ok two more polls, no change: nothing is to happen
	touch(t, s, uri)
	assert.Equal(t, "contents of "+uri+" v1", text(nextEvent(t, events, EventPollChanged, "m")), "the unchanged polls published nothing")

	reconnectAndWait(t, s, "m") // the new process starts over: v0 again
	assert.Equal(t, "contents of "+uri, text(nextEvent(t, events, EventPollChanged, "m")), "polling resumed on the new connection")

	require.NoError(t, s.Polling().Unsubscribe(id))
	assert.ErrorIs(t, s.Polling().Unsubscribe(id), ErrUnknownPoll)
	assert.Empty(t, s.Polling().List())

	_, err = s.Polling().Subscribe(PollSpec{Tool: "mcp__m__nope"})
	assert.ErrorIs(t, err, ErrUnknownTool)
	tid, err := s.Polling().Subscribe(PollSpec{Tool: "mcp__m__echo", Args: json.RawMessage(`{"text":"same"}`)})
	require.NoError(t, err)
	assert.Equal(t, DefaultPollInterval, s.Polling().List()[tid].Interval)
	ev = nextEvent(t, events, EventPollChanged, "m")
	assert.Equal(t, tid, ev.PollID)
	// Left running: Close stops it (the goroutine-leak check says so).
}

// server-everything sends resources/updated for a subscribed resource
// every few seconds once its updates are switched on.
func TestEverythingResourceSubscription(t *testing.T) {
	t.Parallel()
	s := start(t, testOptions)
	settleEverything(t, s)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	res, _, err := s.Resources().List("ev")
	require.NoError(t, err)
	require.NotEmpty(t, res)
	uri := res[0].Resource.URI
	require.NoError(t, s.Resources().Subscribe(t.Context(), "ev", uri))
	toolText(t, s, QualifiedName("ev", "toggle-subscriber-updates"), `{}`)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		ev := nextEvent(t, events, EventResourceUpdated, "ev")
		if ev.URI == uri {
			return
		}
	}
	t.Fatal("no update of the subscribed resource")
}
