package mcpvisor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// server-everything's research tool runs as a task: the handle polls it
// to completion, reporting its statuses, and fetches the result; a second
// task is cancelled; both are listed.
func TestEverythingTask(t *testing.T) {
	t.Parallel()
	s := start(t, testOptions)
	settleEverything(t, s)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 1024)
	name := QualifiedName("ev", "simulate-research-query")
	awaitTool(t, s, name)

	task, err := s.Tasks().Call(t.Context(), name, json.RawMessage(`{"topic":"actors"}`), time.Minute)
	require.NoError(t, err)
	assert.NotEmpty(t, task.ID)
	assert.Equal(t, protocol.TaskWorking, task.Created.Status)
	var statuses []string
	res, final, err := task.Wait(t.Context(), func(st protocol.Task) { statuses = append(statuses, st.Status) })
	require.NoError(t, err)
	assert.Equal(t, protocol.TaskCompleted, final.Status)
	assert.Equal(t, protocol.TaskWorking, statuses[0])
	assert.Equal(t, protocol.TaskCompleted, statuses[len(statuses)-1])
	require.NotEmpty(t, res.Content)
	assert.Contains(t, res.Content[0].Text, "Research Report: actors")

	other, err := s.Tasks().Call(t.Context(), name, json.RawMessage(`{"topic":"cancel me"}`), 0)
	require.NoError(t, err)
	st, err := other.Cancel(t.Context())
	require.NoError(t, err)
	assert.Equal(t, protocol.TaskCancelled, st.Status)
	_, _, err = other.Wait(t.Context(), nil)
	assert.ErrorContains(t, err, "cancelled")

	tasks, err := s.Tasks().List(t.Context(), "ev")
	require.NoError(t, err)
	var ids []string
	for _, tk := range tasks {
		ids = append(ids, tk.TaskID)
	}
	assert.Subset(t, ids, []string{task.ID, other.ID})

	// Status notifications, when the server sends them, are events.
	deadline := time.After(2 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Type == EventTaskStatus {
				assert.True(t, strings.Contains(string(ev.Data), ev.TaskID))
				return
			}
		case <-deadline:
			t.Log("server-everything sent no notifications/tasks/status (they are optional)")
			return
		}
	}
}

func TestTasksNeedTheCapability(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"m": plain()})
	_, err := s.Tasks().Call(t.Context(), "mcp__m__echo", json.RawMessage(`{"text":"x"}`), 0)
	assert.ErrorIs(t, err, ErrTasksUnsupported)
}
