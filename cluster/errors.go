package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/cluster/internal/wire"
)

// Errors of cluster mode. Calls return the same typed errors as
// single-node mode (mcpvisor.ErrUnknownTool, *mcpvisor.NotReadyError,
// *mcpvisor.ConnectionLostError, …); these add what only a cluster has.
var (
	// ErrStart: the member could not start (a port taken, a bad option);
	// it wraps the cause. protoactor panics on these: Start recovers.
	ErrStart = errors.New("mcpvisor cluster: member did not start")
	// ErrNoOwner: no member could be reached for the server (its owner
	// died and the cluster has not placed it again yet, or no member
	// runs the kind). A call that gives up on it returns a
	// *mcpvisor.NotReadyError that unwraps to ErrNoOwner.
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
	// *mcpvisor.ConnectionLostError wrapping it (it may have run).
	ErrMemberLost = errors.New("mcpvisor cluster: the server's member left the cluster during the call")
	// ErrLeft: the member has left the cluster (Leave or Close).
	ErrLeft = errors.New("mcpvisor cluster: member left")
)

// errorOf rebuilds the typed error a CallResult carries.
func errorOf(server string, r *wire.CallResult) error {
	msg := errors.New(r.GetMessage())
	switch r.GetKind() {
	case wire.ErrorKind_ERROR_KIND_NONE:
		return nil
	case wire.ErrorKind_ERROR_KIND_UNKNOWN_TOOL:
		return fmt.Errorf("%w: %s", mcpvisor.ErrUnknownTool, r.GetMessage())
	case wire.ErrorKind_ERROR_KIND_UNKNOWN_SERVER:
		return fmt.Errorf("%w: %s", mcpvisor.ErrUnknownServer, r.GetMessage())
	case wire.ErrorKind_ERROR_KIND_SERVER_OFF:
		return fmt.Errorf("%w: %s", mcpvisor.ErrServerOff, r.GetMessage())
	case wire.ErrorKind_ERROR_KIND_NOT_READY:
		return &mcpvisor.NotReadyError{Server: server, State: mcpvisor.State(r.GetState()), Cause: msg}
	case wire.ErrorKind_ERROR_KIND_CONNECTION_CLOSED:
		return &mcpvisor.ConnectionLostError{Server: server, Attempt: int(r.GetAttempt()), Err: mcpvisor.ErrConnectionClosed}
	case wire.ErrorKind_ERROR_KIND_SERVER_RESTARTING:
		return &mcpvisor.ConnectionLostError{Server: server, Attempt: int(r.GetAttempt()), Err: mcpvisor.ErrServerRestarting}
	case wire.ErrorKind_ERROR_KIND_CLOSED:
		return fmt.Errorf("%w: %s", mcpvisor.ErrClosed, r.GetMessage())
	case wire.ErrorKind_ERROR_KIND_DEADLINE:
		// The call ran out of time on the server's member: ErrTimeout and
		// context.DeadlineExceeded, as on one node.
		return fmt.Errorf("mcpvisor cluster: server %q: %w (%w): %s", server, mcpvisor.ErrTimeout, contextDeadline, r.GetMessage())
	case wire.ErrorKind_ERROR_KIND_DRAINING:
		return fmt.Errorf("%w: %s", ErrDraining, r.GetMessage())
	case wire.ErrorKind_ERROR_KIND_AUTHORIZATION_REQUIRED:
		a := r.GetAuthorization()
		return &mcpvisor.AuthorizationRequiredError{Server: server, Principal: a.GetPrincipal(), Flow: a.GetFlow(),
			URL: a.GetUrl(), Expires: time.UnixMilli(a.GetExpiresUnixMs())}
	case wire.ErrorKind_ERROR_KIND_NO_SUBJECT_TOKEN:
		return fmt.Errorf("%w: %s", mcpvisor.ErrNoSubjectToken, r.GetMessage())
	case wire.ErrorKind_ERROR_KIND_NO_USER_REDIRECT:
		return fmt.Errorf("%w: %s", mcpvisor.ErrNoUserRedirect, r.GetMessage())
	default:
		return fmt.Errorf("mcpvisor cluster: server %q: %s", server, r.GetMessage())
	}
}

// resultOf classifies a local call's error for the wire.
func resultOf(err error) *wire.CallResult {
	r := &wire.CallResult{Message: err.Error()}
	var notReady *mcpvisor.NotReadyError
	var lost *mcpvisor.ConnectionLostError
	var authz *mcpvisor.AuthorizationRequiredError
	switch {
	case errors.As(err, &authz):
		// The principal's pending authorization, held by this member's
		// supervisor: the caller's member rebuilds the error (its URL
		// is the principal's alone, like the call's answer).
		r.Kind = wire.ErrorKind_ERROR_KIND_AUTHORIZATION_REQUIRED
		r.Authorization = &wire.Authorization{Server: authz.Server, Principal: authz.Principal, Flow: authz.Flow,
			Url: authz.URL, ExpiresUnixMs: authz.Expires.UnixMilli()}
	case errors.As(err, &lost):
		r.Attempt = int32(lost.Attempt)
		r.Kind = wire.ErrorKind_ERROR_KIND_CONNECTION_CLOSED
		if errors.Is(lost.Err, mcpvisor.ErrServerRestarting) {
			r.Kind = wire.ErrorKind_ERROR_KIND_SERVER_RESTARTING
		}
	case errors.As(err, &notReady):
		r.Kind = wire.ErrorKind_ERROR_KIND_NOT_READY
		r.State = string(notReady.State)
		if notReady.Cause != nil {
			r.Message = notReady.Cause.Error()
		}
	case errors.Is(err, mcpvisor.ErrUnknownTool):
		r.Kind = wire.ErrorKind_ERROR_KIND_UNKNOWN_TOOL
	case errors.Is(err, mcpvisor.ErrUnknownServer):
		r.Kind = wire.ErrorKind_ERROR_KIND_UNKNOWN_SERVER
	case errors.Is(err, mcpvisor.ErrServerOff):
		r.Kind = wire.ErrorKind_ERROR_KIND_SERVER_OFF
	case errors.Is(err, mcpvisor.ErrClosed):
		r.Kind = wire.ErrorKind_ERROR_KIND_CLOSED
	case errors.Is(err, contextDeadline):
		r.Kind = wire.ErrorKind_ERROR_KIND_DEADLINE
	case errors.Is(err, ErrDraining):
		r.Kind = wire.ErrorKind_ERROR_KIND_DRAINING
	case errors.Is(err, mcpvisor.ErrNoSubjectToken):
		r.Kind = wire.ErrorKind_ERROR_KIND_NO_SUBJECT_TOKEN
	case errors.Is(err, mcpvisor.ErrNoUserRedirect):
		r.Kind = wire.ErrorKind_ERROR_KIND_NO_USER_REDIRECT
	default:
		r.Kind = wire.ErrorKind_ERROR_KIND_OTHER
	}
	return r
}
