package mcpvisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/session"
)

// NotReadyError reports a call to a server that is not ready. It matches
// ErrServerNotReady and unwraps to the server's last error, if any, and to
// why the call stopped waiting, if it waited.
type NotReadyError struct {
	Server string
	State  State
	Cause  error // the server's last error
	// Waited is set when the call waited for the server and its context
	// ended first: context.DeadlineExceeded or the cancellation cause.
	Waited error

	// from is the error the supervisor's core returned, when this one
	// was made from it (hostErr): its message and chain are kept.
	from error
}

func (e *NotReadyError) Error() string {
	if e.from != nil {
		return e.from.Error()
	}
	msg := fmt.Sprintf("mcpvisor: server %q is %s", e.Server, e.State)
	if e.Waited != nil {
		msg = fmt.Sprintf("mcpvisor: server %q still %s when the call gave up waiting (%v)", e.Server, e.State, e.Waited)
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Is makes a NotReadyError match ErrServerNotReady.
func (e *NotReadyError) Is(target error) bool { return target == ErrServerNotReady }

// Unwrap returns the server's last error and why the call gave up.
func (e *NotReadyError) Unwrap() []error {
	if e.from != nil {
		return []error{e.from}
	}
	var errs []error
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	if e.Waited != nil {
		errs = append(errs, e.Waited)
	}
	return errs
}

// ConnectionLostError reports a call whose connection ended before it was
// answered: the server's process exited, the transport broke, or the
// supervisor tore the connection down to replace it. The call may or may
// not have been carried out by the server. It matches ErrConnectionClosed
// or ErrServerRestarting (whichever Err does).
type ConnectionLostError struct {
	Server string
	// Attempt is the number of the reconnect attempt the loss of this
	// connection leads to: 1 when the connection was the first of its
	// reconnect episode, n+1 when it was made by the episode's attempt n.
	// (A session that merely expired, or a server out of budget, may make
	// no such attempt.)
	Attempt int
	Err     error

	from error // as in NotReadyError
}

func (e *ConnectionLostError) Error() string {
	if e.from != nil {
		return e.from.Error()
	}
	return fmt.Sprintf("mcpvisor: server %q: %v (reconnect attempt %d)", e.Server, e.Err, e.Attempt)
}

// Unwrap returns the session's error.
func (e *ConnectionLostError) Unwrap() error {
	if e.from != nil {
		return e.from
	}
	return e.Err
}

// TimeoutError reports a call whose deadline passed. It matches
// ErrTimeout and context.DeadlineExceeded with errors.Is, and implements
// net.Error (Timeout is true) so that standard-library callers treat it
// as a timeout.
type TimeoutError struct {
	Method string        // the request that timed out: tools/call, …
	After  time.Duration // how long the call waited
	Sent   bool          // whether the request reached the transport

	from error // as in NotReadyError
}

func (e *TimeoutError) Error() string {
	if e.from != nil {
		return e.from.Error()
	}
	state := "after the request was sent"
	if !e.Sent {
		state = "before the request could be sent"
	}
	return fmt.Sprintf("mcpvisor: %s timed out after %v, %s", e.Method, e.After.Round(time.Millisecond), state)
}

// Is makes a TimeoutError match ErrTimeout and context.DeadlineExceeded.
func (e *TimeoutError) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
}

// Unwrap returns the error the supervisor's core reported, if this one
// was made from it.
func (e *TimeoutError) Unwrap() error { return e.from }

// Timeout reports true (net.Error).
func (e *TimeoutError) Timeout() bool { return true }

// Temporary reports true (net.Error): the server may answer a later call.
func (e *TimeoutError) Temporary() bool { return true }

// InputError reports a multi round-trip request whose input rounds could
// not be completed: which round, and which input request failed (Key and
// InputMethod, if one did). It matches ErrInputRequired and its cause
// with errors.Is.
type InputError struct {
	Method      string // the request: tools/call, prompts/get or resources/read
	Round       int    // 1 for the server's first InputRequiredResult
	Key         string // the input request's key in the server's inputRequests
	InputMethod string // its method: elicitation/create, sampling/createMessage, roots/list
	Err         error  // why it failed: ErrNoInputHandler, ErrTooManyInputRounds, the handler's error…

	from error // as in NotReadyError
}

func (e *InputError) Error() string {
	if e.from != nil {
		return e.from.Error()
	}
	if e.Key != "" {
		return fmt.Sprintf("mcpvisor: %s, input round %d: %s (%s): %v", e.Method, e.Round, e.Key, e.InputMethod, e.Err)
	}
	return fmt.Sprintf("mcpvisor: %s, input round %d: %v", e.Method, e.Round, e.Err)
}

// Is makes an InputError match ErrInputRequired.
func (e *InputError) Is(target error) bool { return target == ErrInputRequired }

// Unwrap returns the cause (through the core's error, when this one was
// made from it).
func (e *InputError) Unwrap() error {
	if e.from != nil {
		return e.from
	}
	return e.Err
}

// hostErr is err as a host sees it: a typed error of the supervisor's
// core (actors, session) becomes the root package's own (which
// errors.As finds), its message and chain unchanged, so errors.Is on
// every sentinel still holds. An error carrying several of them becomes
// the first of: NotReadyError, ConnectionLostError, InputError,
// TimeoutError.
func hostErr(err error) error {
	if err == nil {
		return nil
	}
	if nr, ok := errors.AsType[*actors.NotReadyError](err); ok {
		return &NotReadyError{Server: nr.Server, State: State(nr.State), Cause: nr.Cause, Waited: nr.Waited, from: err}
	}
	if lost, ok := errors.AsType[*actors.ConnectionLostError](err); ok {
		return &ConnectionLostError{Server: lost.Server, Attempt: lost.Attempt, Err: lost.Err, from: err}
	}
	if in, ok := errors.AsType[*session.InputError](err); ok {
		return &InputError{Method: in.Method, Round: in.Round, Key: in.Key, InputMethod: in.InputMethod, Err: in.Err, from: err}
	}
	if te, ok := errors.AsType[*session.TimeoutError](err); ok {
		return &TimeoutError{Method: te.Method, After: te.After, Sent: te.Sent, from: err}
	}
	return err
}

// hostResult passes a result through and its error through hostErr.
func hostResult[T any](v T, err error) (T, error) { return v, hostErr(err) }
