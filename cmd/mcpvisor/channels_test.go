package main

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// statelessCall posts one 2026-07-28 tools/call (no session needed) and
// returns its structured result, bounded in time.
func statelessCall(t *testing.T, base, tool string, args any) json.RawMessage {
	t.Helper()
	a, err := json.Marshal(args)
	require.NoError(t, err)
	var last string
	for _, line := range strings.Split(statelessToolCall(base, 1, tool, string(a)), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			line = d
		}
		if strings.HasPrefix(line, "{") {
			last = line
		}
	}
	var answer struct {
		Result struct {
			StructuredContent json.RawMessage `json:"structuredContent"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(last), &answer), "answer: %s", last)
	require.Empty(t, answer.Error, "answer: %s", last)
	return answer.Result.StructuredContent
}

// channelQueueOf reads the channel queue's counters from /status.
func channelQueueOf(t *testing.T, base string) (received, queued, dropped int) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(base + "/status")
	require.NoError(t, err)
	defer resp.Body.Close()
	var rep struct {
		Channels *struct{ Received, Queued, Dropped int }
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
	require.NotNil(t, rep.Channels)
	return rep.Channels.Received, rep.Channels.Queued, rep.Channels.Dropped
}

// The gateway's channel queue outlives a reload (SIGHUP): messages queued
// before it are still delivered after it, with those pushed after it, in
// order, none lost.
func TestSuperviseChannelQueueSurvivesReload(t *testing.T) {
	cfg := writeConfig(t, map[string]any{"ch": mock(binPath, "-name", "ch", "-channel", "-channel-at-start", "30")})
	run := startSupervise(t, t.TempDir(), nil, "--config", cfg)
	base := run.base
	require.Eventually(t, func() bool { r, _, _ := channelQueueOf(t, base); return r == 30 }, 20*time.Second, 20*time.Millisecond,
		"the server's 30 messages are queued")

	// The reload changes ch (it reconnects: a new process, which pushes
	// 20 more) and adds a server.
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"ch": mock(binPath, "-name", "ch-v2", "-channel", "-channel-at-start", "20"),
		"b":  mock(binPath, "-name", "b"),
	}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfg+".tmp", b, 0o644))
	require.NoError(t, os.Rename(cfg+".tmp", cfg))
	require.NoError(t, run.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { r, _, _ := channelQueueOf(t, base); return r == 50 }, 20*time.Second, 20*time.Millisecond,
		"the reconnected server's 20 messages join the queue")

	var got struct {
		Status   string
		Messages []struct{ Server, Content string }
		Dropped  int
		Queued   int
	}
	require.NoError(t, json.Unmarshal(statelessCall(t, base, "wait_for_channel_message", map[string]any{"max_messages": 100, "timeout_seconds": 5}), &got))
	assert.Equal(t, "message_received", got.Status)
	var contents []string
	for _, m := range got.Messages {
		assert.Equal(t, "ch", m.Server)
		contents = append(contents, m.Content)
	}
	var want []string
	for i := 1; i <= 30; i++ {
		want = append(want, "start"+strconv.Itoa(i))
	}
	for i := 1; i <= 20; i++ {
		want = append(want, "start"+strconv.Itoa(i))
	}
	assert.Equal(t, want, contents, "the 30 from before the reload, then the 20 from after")
	assert.Zero(t, got.Dropped)
	assert.Zero(t, got.Queued)
	_, queued, dropped := channelQueueOf(t, base)
	assert.Zero(t, queued)
	assert.Zero(t, dropped)

	run.stop(t)
}
