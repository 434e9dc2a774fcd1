package mcpvisor

import (
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
