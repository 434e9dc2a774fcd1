package mcpvisor

import (
	"context"
	"time"

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

	sys *Supervisor
	h   *serverHandle
}

// CallToolAsTask calls a tool as a task (for servers declaring
// tasks.requests.tools.call and tools whose execution.taskSupport allows
// it) and returns its handle once the server accepted it; ttl, when
// positive, is the task lifetime asked for.
func (s *Supervisor) CallToolAsTask(ctx context.Context, name string, args any, ttl time.Duration) (*TaskHandle, error) {
	raw, err := encodeArgs(args)
	if err != nil {
		return nil, err
	}
	return s.callToolAsTask(ctx, name, raw, ttl)
}
