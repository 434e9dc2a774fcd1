package session

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors a call can end with besides the server's own JSON-RPC error
// (*protocol.Error). Test with errors.Is; the root package re-exports them.
var (
	// ErrConnectionClosed: the connection ended before the call was answered,
	// or was already closed when the call was made.
	ErrConnectionClosed = errors.New("mcp: connection closed")

	// ErrServerRestarting: the connection was torn down on purpose to be
	// replaced (reconnect, config change, actor restart).
	ErrServerRestarting = errors.New("mcp: server restarting")

	// ErrTimeout: the call's deadline passed. A *TimeoutError also matches
	// context.DeadlineExceeded.
	ErrTimeout = errors.New("mcp: call timed out")

	// ErrVersionMismatch: the server and mcpvisor share no protocol version.
	ErrVersionMismatch = errors.New("mcp: no common protocol version")

	// ErrMalformedResponse: the server answered with a frame that is not
	// valid JSON-RPC, or with a result that does not decode.
	ErrMalformedResponse = errors.New("mcp: malformed response")
)

// TimeoutError reports a call whose deadline passed. It matches ErrTimeout
// and context.DeadlineExceeded with errors.Is, and implements net.Error so
// that standard-library callers treat it as a timeout.
type TimeoutError struct {
	Method string
	After  time.Duration // how long the call waited
	Sent   bool          // whether the request reached the transport
}

func (e *TimeoutError) Error() string {
	state := "after the request was sent"
	if !e.Sent {
		state = "before the request could be sent"
	}
	return fmt.Sprintf("mcp: %s timed out after %v, %s", e.Method, e.After.Round(time.Millisecond), state)
}

// Is makes a TimeoutError match ErrTimeout and context.DeadlineExceeded.
func (e *TimeoutError) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
}

// Timeout reports true (net.Error).
func (e *TimeoutError) Timeout() bool { return true }

// Temporary reports true (net.Error): the server may answer a later call.
func (e *TimeoutError) Temporary() bool { return true }
