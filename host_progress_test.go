package mcpvisor

import (
	"context"
	"encoding/json"
	"github.com/mcpvisor/mcpvisor/protocol"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// Progress reports reach the caller's callback in order, and the bus.
func TestCallProgress(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"p": mock("-progress")})
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	var mu sync.Mutex
	var got []float64
	res, err := s.CallToolWith(t.Context(), "mcp__p__progress", json.RawMessage(`{"steps":5,"ms":1}`), CallOptions{Progress: func(p protocol.ProgressParams) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, p.Progress)
		assert.Equal(t, 5.0, *p.Total)
	}})
	require.NoError(t, err)
	assert.Equal(t, "done after 5 steps", res.Content[0].Text)
	mu.Lock()
	assert.Equal(t, []float64{1, 2, 3, 4, 5}, got, "every report, in order, before the call returns")
	mu.Unlock()
	ev := nextEvent(t, events, EventProgress, "p")
	var p protocol.ProgressParams
	require.NoError(t, json.Unmarshal(ev.Data, &p))
	assert.JSONEq(t, `"mcpvisor-1"`, string(p.ProgressToken))
}

// Cancelling a call's context sends notifications/cancelled.
func TestCancelledCallTellsTheServer(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"p": mock("-progress")})
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan struct{}, 1)
	errc := make(chan error, 1)
	go func() {
		_, err := s.CallToolWith(ctx, "mcp__p__progress", json.RawMessage(`{"steps":100,"ms":50}`), CallOptions{Progress: func(protocol.ProgressParams) {
			select {
			case started <- struct{}{}:
			default:
			}
		}})
		errc <- err
	}()
	testwait.Done(t, started, "the first progress report")
	cancel()
	assert.ErrorIs(t, testwait.Recv(t, errc, "the cancelled call to return"), context.Canceled)
	assert.Eventually(t, func() bool {
		res, err := s.CallTool(t.Context(), "mcp__p__cancelled", nil)
		return err == nil && res.Content[0].Text == "1"
	}, 5*time.Second, 20*time.Millisecond, "the server was told")
}
