package mcpvisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/session"
)

// TimeoutError reports a call whose deadline passed. It matches
// ErrTimeout and context.DeadlineExceeded with errors.Is, and implements
// net.Error (Timeout is true) so that standard-library callers treat it
// as a timeout.
type TimeoutError struct {
	Method string        // the request that timed out: tools/call, …
	After  time.Duration // how long the call waited
	Sent   bool          // whether the request reached the transport

	from error // the session's error this one was made from (hostErr)
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

	from error // the session's error this one was made from (hostErr)
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

// Unwrap returns the cause (through the session's error, when this one was
// made from it).
func (e *InputError) Unwrap() error {
	if e.from != nil {
		return e.from
	}
	return e.Err
}

// hostErr is err as a host sees it: a typed error of a server's session
// (package internal/session) becomes the root package's own (which
// errors.As finds), its message and chain unchanged, so errors.Is on
// every sentinel still holds. An error carrying both becomes the first
// of: InputError, TimeoutError. onSession applies it to every request's
// outcome, so every call, read and list returns host errors.
func hostErr(err error) error {
	if err == nil {
		return nil
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
