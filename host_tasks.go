package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Tasks returns the servers' tasks: calls run as tasks, and the lists of
// a server's tasks.
func (s *Supervisor) Tasks() Tasks { return Tasks{s} }

// Tasks is what a Supervisor offers of its servers' tasks (MCP's tasks
// utility): a handle got from Supervisor.Tasks, safe for concurrent use
// like the Supervisor.
type Tasks struct{ s *Supervisor }

// Tasks (2025-11-25): task-augmented tool calls, surfaced as a handle the
// host waits on, polls or cancels. A handle names the server and the
// task, not a connection: every request goes to the server's live
// session, so a task survives a reconnect when the server keeps its tasks
// (a new process usually does not: tasks/get then fails).

// ErrTasksUnsupported: the server did not declare tasks.requests.tools.call,
// or speaks an era without tasks in the protocol itself.
var ErrTasksUnsupported = errors.New("mcpvisor: the server does not support task-augmented tool calls")

// defaultTaskPoll is the polling interval when the server suggests none.
const defaultTaskPoll = time.Second

// serverTasks reports whether sess accepts task-augmented tools/call.
func serverTasks(sess *session.Session) bool {
	raw := sess.Peer().Capabilities.Tasks
	if raw == nil || protocol.UsesDiscover(sess.Peer().Version) {
		return false
	}
	var caps struct {
		Requests struct {
			Tools struct {
				Call *json.RawMessage `json:"call"`
			} `json:"tools"`
		} `json:"requests"`
	}
	return json.Unmarshal(*raw, &caps) == nil && caps.Requests.Tools.Call != nil
}

// callToolAsTask calls a tool of the pool as a task (tools/call with a
// task member; ttl, when positive, is the lifetime asked for) and returns
// its handle once the server has accepted it.
func (ts Tasks) callToolAsTask(ctx context.Context, name string, args json.RawMessage, ttl time.Duration) (*TaskHandle, error) {
	s := ts.s
	e, err := s.route(ctx, name, func(p *pool) (poolEntry, bool) {
		e, ok := p.toolsByName.Get(name)
		return e, ok
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %q", err, name)
	}
	if err := s.permissions.permit(ctx, name, e.h, e.name, args); err != nil {
		return nil, err
	}
	var meta protocol.TaskMetadata
	if ttl > 0 {
		ms := ttl.Milliseconds()
		meta.TTL = &ms
	}
	created, err := onSession(ctx, s, e.h, func(ctx context.Context, sess *session.Session) (*protocol.CreateTaskResult, error) {
		if !serverTasks(sess) {
			return nil, fmt.Errorf("%w: %q", ErrTasksUnsupported, e.h.name)
		}
		var res protocol.CreateTaskResult
		err := sess.Call(ctx, protocol.MethodToolsCall, protocol.TaskCallToolParams{Name: e.name, Arguments: args, Task: meta}, &res)
		return &res, err
	})
	if err != nil {
		return nil, err
	}
	if created.Task.TaskID == "" {
		return nil, fmt.Errorf("%w: %s answered a task-augmented call without a task", session.ErrMalformedResponse, e.h.name)
	}
	return &TaskHandle{sys: s, h: e.h, Server: e.h.name, ID: created.Task.TaskID, Created: created.Task, Tool: name}, nil
}

// Get polls the task's state (tasks/get).
func (t *TaskHandle) Get(ctx context.Context) (*protocol.Task, error) {
	return taskRequest[protocol.Task](ctx, t, protocol.MethodTasksGet)
}

// Cancel asks the server to cancel the task (tasks/cancel) and returns
// its state.
func (t *TaskHandle) Cancel(ctx context.Context) (*protocol.Task, error) {
	return taskRequest[protocol.Task](ctx, t, protocol.MethodTasksCancel)
}

// Result returns the tool's result (tasks/result), which the server
// holds back until the task is terminal.
func (t *TaskHandle) Result(ctx context.Context) (*protocol.CallToolResult, error) {
	return taskRequest[protocol.CallToolResult](ctx, t, protocol.MethodTasksResult)
}

// Wait polls the task at the interval the server suggests (1 s when it
// suggests none) until it is terminal, calling onStatus (if not nil)
// whenever its status or message changes, then returns its result. A
// failed or cancelled task returns its final state and an error; the
// result of a failed task, if the server has one, is returned too.
func (t *TaskHandle) Wait(ctx context.Context, onStatus func(protocol.Task)) (*protocol.CallToolResult, *protocol.Task, error) {
	last := ""
	for {
		st, err := t.Get(ctx)
		if err != nil {
			return nil, nil, err
		}
		if key := st.Status + "\x00" + st.StatusMessage; key != last && onStatus != nil {
			last = key
			onStatus(*st)
		}
		if protocol.TaskTerminal(st.Status) {
			if st.Status == protocol.TaskCancelled {
				return nil, st, fmt.Errorf("mcpvisor: task %s on %s was cancelled", t.ID, t.Server)
			}
			res, err := t.Result(ctx)
			if err == nil && st.Status == protocol.TaskFailed {
				err = fmt.Errorf("mcpvisor: task %s on %s failed: %s", t.ID, t.Server, st.StatusMessage)
			}
			return res, st, err
		}
		interval := defaultTaskPoll
		if st.PollInterval != nil && *st.PollInterval > 0 {
			interval = time.Duration(*st.PollInterval) * time.Millisecond
		}
		timer := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, st, ctx.Err()
		case <-timer.C:
		}
	}
}

func taskRequest[T any](ctx context.Context, t *TaskHandle, method string) (*T, error) {
	return onSession(ctx, t.sys, t.h, func(ctx context.Context, sess *session.Session) (*T, error) {
		var res T
		err := sess.Call(ctx, method, protocol.TaskIDParams{TaskID: t.ID}, &res)
		return &res, err
	})
}

// Call calls a tool as a task (for servers declaring
// tasks.requests.tools.call and tools whose execution.taskSupport allows
// it) and returns its handle once the server accepted it; ttl, when
// positive, is the task lifetime asked for.
func (ts Tasks) Call(ctx context.Context, name string, args any, ttl time.Duration) (*TaskHandle, error) {
	raw, err := encodeArgs(args)
	if err != nil {
		return nil, err
	}
	return ts.callToolAsTask(ctx, name, raw, ttl)
}

// List lists a server's tasks.
func (ts Tasks) List(ctx context.Context, server string) ([]protocol.Task, error) {
	s := ts.s
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) ([]protocol.Task, error) {
		var all []protocol.Task
		cursor := ""
		for range 1000 {
			var res protocol.ListTasksResult
			if err := sess.Call(ctx, protocol.MethodTasksList, protocol.PaginatedParams{Cursor: cursor}, &res); err != nil {
				return nil, err
			}
			all = append(all, res.Tasks...)
			if res.NextCursor == "" || res.NextCursor == cursor {
				return all, nil
			}
			cursor = res.NextCursor
		}
		return all, nil
	})
}
