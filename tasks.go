package mcpvisor

import (
	"context"
	"time"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Task is a task's state as the server reports it (2025-11-25 tasks).
type Task = protocol.Task

// TaskHandle is a task-augmented tool call in progress: Get polls it,
// Wait polls it to the end and returns the result, Result fetches the
// result, Cancel cancels it. It names the server and the task, not a
// connection, so it keeps working across a reconnect when the server
// keeps its tasks.
type TaskHandle = actors.TaskHandle

// ErrTasksUnsupported: the server does not accept task-augmented tool
// calls.
var ErrTasksUnsupported = actors.ErrTasksUnsupported

// CallToolAsTask calls a tool as a task (for servers declaring
// tasks.requests.tools.call and tools whose execution.taskSupport allows
// it) and returns its handle once the server accepted it; ttl, when
// positive, is the task lifetime asked for.
func (s *Supervisor) CallToolAsTask(ctx context.Context, name string, args any, ttl time.Duration) (*TaskHandle, error) {
	raw, err := encodeArgs(args)
	if err != nil {
		return nil, err
	}
	return hostResult(s.sys.CallToolAsTask(ctx, name, raw, ttl))
}

// ListTasks lists a server's tasks.
func (s *Supervisor) ListTasks(ctx context.Context, server string) ([]Task, error) {
	return hostResult(s.sys.ListTasks(ctx, server))
}
