package mcpvisor

import (
	"context"
	"time"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// TaskHandle is a task-augmented tool call in progress: Get polls it,
// Wait polls it to the end and returns the result, Result fetches the
// result, Cancel cancels it. It names the server and the task, not a
// connection, so it keeps working across a reconnect when the server
// keeps its tasks.
//
// Concurrency: its methods may be called from several goroutines at
// once; each is one request to the server (Wait, a series of them).
type TaskHandle struct {
	// Server and ID name the task; Tool is the pool name of the tool
	// called; Created is the task's state when the server accepted it.
	Server, ID string
	Created    protocol.Task
	Tool       string

	h *actors.TaskHandle
}

// Get polls the task's state (tasks/get).
func (t *TaskHandle) Get(ctx context.Context) (*protocol.Task, error) {
	return hostResult(t.h.Get(ctx))
}

// Cancel asks the server to cancel the task (tasks/cancel) and returns
// its state.
func (t *TaskHandle) Cancel(ctx context.Context) (*protocol.Task, error) {
	return hostResult(t.h.Cancel(ctx))
}

// Result returns the tool's result (tasks/result), which the server
// holds back until the task is terminal.
func (t *TaskHandle) Result(ctx context.Context) (*protocol.CallToolResult, error) {
	return hostResult(t.h.Result(ctx))
}

// Wait polls the task at the interval the server suggests (1 s when it
// suggests none) until it is terminal, calling onStatus (if not nil)
// whenever its status or message changes, then returns its result. A
// failed or cancelled task returns its final state and an error; the
// result of a failed task, if the server has one, is returned too.
func (t *TaskHandle) Wait(ctx context.Context, onStatus func(protocol.Task)) (*protocol.CallToolResult, *protocol.Task, error) {
	res, st, err := t.h.Wait(ctx, onStatus)
	return res, st, hostErr(err)
}

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
	h, err := s.sys.CallToolAsTask(ctx, name, raw, ttl)
	if err != nil {
		return nil, hostErr(err)
	}
	return &TaskHandle{Server: h.Server, ID: h.ID, Created: h.Created, Tool: h.Tool, h: h}, nil
}

// ListTasks lists a server's tasks.
func (s *Supervisor) ListTasks(ctx context.Context, server string) ([]protocol.Task, error) {
	return hostResult(s.sys.ListTasks(ctx, server))
}
