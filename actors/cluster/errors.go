package cluster

import (
	"errors"
	"fmt"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/internal/session"
)

// Errors of cluster mode. Calls return the same typed errors as
// single-node mode (actors.ErrUnknownTool, *actors.NotReadyError,
// *actors.ConnectionLostError, …); these add what only a cluster has.
var (
	// ErrStart: the member could not start (a port taken, a bad option);
	// it wraps the cause. protoactor panics on these: Start recovers.
	ErrStart = errors.New("mcpvisor cluster: member did not start")
	// ErrNoOwner: no member could be reached for the server (its owner
	// died and the cluster has not placed it again yet, or no member
	// runs the kind). A call that gives up on it returns a
	// *actors.NotReadyError that unwraps to ErrNoOwner.
	ErrNoOwner = errors.New("mcpvisor cluster: no member reachable for the server")
	// ErrDraining: the member is leaving and takes no new calls; callers
	// retry on the server's next owner (it is never returned to a
	// caller whose deadline allows a retry).
	ErrDraining = errors.New("mcpvisor cluster: member draining")
	// ErrMemberRunning: a member is already running in this process
	// (protoactor's remote keeps process-global state; one member per
	// process). Close it first.
	ErrMemberRunning = errors.New("mcpvisor cluster: a member is already running in this process")
	// ErrMemberLost: the member that ran the server left the topology
	// (died) while a call was in flight there; the call ends with a
	// *actors.ConnectionLostError wrapping it (it may have run).
	ErrMemberLost = errors.New("mcpvisor cluster: the server's member left the cluster during the call")
	// ErrLeft: the member has left the cluster (Leave or Close).
	ErrLeft = errors.New("mcpvisor cluster: member left")
)

// errorOf rebuilds the typed error a CallResult carries.
func errorOf(server string, r *CallResult) error {
	msg := errors.New(r.GetMessage())
	switch r.GetKind() {
	case ErrorKind_ERROR_KIND_NONE:
		return nil
	case ErrorKind_ERROR_KIND_UNKNOWN_TOOL:
		return fmt.Errorf("%w: %s", actors.ErrUnknownTool, r.GetMessage())
	case ErrorKind_ERROR_KIND_UNKNOWN_SERVER:
		return fmt.Errorf("%w: %s", actors.ErrUnknownServer, r.GetMessage())
	case ErrorKind_ERROR_KIND_SERVER_OFF:
		return fmt.Errorf("%w: %s", actors.ErrServerOff, r.GetMessage())
	case ErrorKind_ERROR_KIND_NOT_READY:
		return &actors.NotReadyError{Server: server, State: actors.State(r.GetState()), Cause: msg}
	case ErrorKind_ERROR_KIND_CONNECTION_CLOSED:
		return &actors.ConnectionLostError{Server: server, Attempt: int(r.GetAttempt()), Err: session.ErrConnectionClosed}
	case ErrorKind_ERROR_KIND_SERVER_RESTARTING:
		return &actors.ConnectionLostError{Server: server, Attempt: int(r.GetAttempt()), Err: session.ErrServerRestarting}
	case ErrorKind_ERROR_KIND_CLOSED:
		return fmt.Errorf("%w: %s", actors.ErrClosed, r.GetMessage())
	case ErrorKind_ERROR_KIND_DEADLINE:
		return fmt.Errorf("mcpvisor cluster: server %q: %w: %s", server, contextDeadline, r.GetMessage())
	case ErrorKind_ERROR_KIND_DRAINING:
		return fmt.Errorf("%w: %s", ErrDraining, r.GetMessage())
	default:
		return fmt.Errorf("mcpvisor cluster: server %q: %s", server, r.GetMessage())
	}
}

// resultOf classifies a local call's error for the wire.
func resultOf(err error) *CallResult {
	r := &CallResult{Message: err.Error()}
	var notReady *actors.NotReadyError
	var lost *actors.ConnectionLostError
	switch {
	case errors.As(err, &lost):
		r.Attempt = int32(lost.Attempt)
		r.Kind = ErrorKind_ERROR_KIND_CONNECTION_CLOSED
		if errors.Is(lost.Err, session.ErrServerRestarting) {
			r.Kind = ErrorKind_ERROR_KIND_SERVER_RESTARTING
		}
	case errors.As(err, &notReady):
		r.Kind = ErrorKind_ERROR_KIND_NOT_READY
		r.State = string(notReady.State)
		if notReady.Cause != nil {
			r.Message = notReady.Cause.Error()
		}
	case errors.Is(err, actors.ErrUnknownTool):
		r.Kind = ErrorKind_ERROR_KIND_UNKNOWN_TOOL
	case errors.Is(err, actors.ErrUnknownServer):
		r.Kind = ErrorKind_ERROR_KIND_UNKNOWN_SERVER
	case errors.Is(err, actors.ErrServerOff):
		r.Kind = ErrorKind_ERROR_KIND_SERVER_OFF
	case errors.Is(err, actors.ErrClosed):
		r.Kind = ErrorKind_ERROR_KIND_CLOSED
	case errors.Is(err, contextDeadline):
		r.Kind = ErrorKind_ERROR_KIND_DEADLINE
	case errors.Is(err, ErrDraining):
		r.Kind = ErrorKind_ERROR_KIND_DRAINING
	default:
		r.Kind = ErrorKind_ERROR_KIND_OTHER
	}
	return r
}
