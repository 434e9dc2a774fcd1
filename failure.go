package mcpvisor

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os/exec"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	stdiot "github.com/mcpvisor/mcpvisor/transports/stdio"
	"github.com/mcpvisor/mcpvisor/transports/stdio/reaper"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
)

// ClassifyFailure decides what err means for supervision.
func ClassifyFailure(err error) FailureKind {
	if err == nil {
		return FailureNone
	}
	var notReady *NotReadyError
	if errors.As(err, &notReady) {
		// The call reached no server: what matters is why the server is
		// not ready (not that the call's deadline passed meanwhile).
		if notReady.Cause == nil {
			return FailureCall
		}
		return ClassifyFailure(notReady.Cause)
	}
	var rpcErr *protocol.Error
	var timeout *session.TimeoutError
	var status *transports.HTTPStatusError
	var execErr *exec.Error
	var tooBig *transports.FrameTooLargeError
	var exit *stdiot.ProcessExitError
	switch {
	case errors.Is(err, sandbox.ErrUnavailable):
		return FailureSandbox
	case errors.As(err, &exit) && exit.ResourceLimit != "":
		return FailureResourceLimit
	case errors.Is(err, reaper.ErrNotInstalled), errors.Is(err, transports.ErrInvalidSandbox):
		return FailureConfig
	// The session's own verdicts come first: they wrap the transport
	// error that caused them.
	case errors.Is(err, session.ErrVersionMismatch), errors.Is(err, session.ErrMalformedResponse):
		return FailureProtocol
	case errors.Is(err, ErrNeedsApproval):
		return FailureConfig
	case errors.Is(err, ErrUnresponsive):
		// A server that stopped answering: reconnect with backoff.
		return FailureTransient
	case errors.Is(err, ErrUnsupportedTransport), errors.As(err, &execErr),
		errors.Is(err, fs.ErrPermission), errors.Is(err, fs.ErrNotExist):
		// A command that cannot be found or run, a missing working
		// directory or file.
		return FailureConfig
	case errors.Is(err, session.ErrInputRequired):
		// The server answered; the host could not give it the input it
		// asked for.
		return FailureCall
	case errors.As(err, &timeout), errors.As(err, &rpcErr), errors.Is(err, context.Canceled),
		errors.Is(err, ErrUnknownTool), errors.Is(err, ErrUnknownPrompt), errors.Is(err, ErrUnknownServer):
		return FailureCall
	case errors.As(err, &tooBig):
		// One answer too large: the call fails. Many in a row end the
		// session with ErrMalformedResponse, above.
		return FailureProtocol
	case errors.As(err, &status) && status.StatusCode == http.StatusNotImplemented:
		return FailureProtocol
	case errors.Is(err, oauth.ErrForbiddenAddress):
		// The authorization metadata of a public server points at an
		// internal address: no retry changes that.
		return FailureConfig
	case errors.Is(err, oauth.ErrTransient), errors.Is(err, oauth.ErrBackoff):
		// The authorization server is unreachable or failing: the
		// credentials are kept, and the connect is retried with backoff.
		return FailureTransient
	case isOAuthError(err):
		// Login needed, or an authorization that cannot proceed without
		// someone (a resource or issuer mismatch, no PKCE, no client).
		return FailureAuth
	}
	switch transports.Classify(err) {
	case transports.ClassSessionExpired:
		return FailureSessionExpired
	case transports.ClassAuth:
		return FailureAuth
	case transports.ClassConfig, transports.ClassTLS:
		return FailureConfig
	case transports.ClassHTTP4xx:
		return FailureProtocol
	case transports.ClassRefused, transports.ClassReset, transports.ClassTimeout, transports.ClassDNS, transports.ClassHTTP5xx:
		return FailureTransient
	case transports.ClassCanceled:
		return FailureCall
	}
	// The connection ended (EOF, process exit, a closed transport), or
	// something unrecognised ended it: reconnecting is the way out.
	return FailureClosed
}

// strikes reports whether a call that ended with err costs its connection
// a strike (true), proves it healthy (false, with ok), or says nothing
// about it (ok false: the caller gave up, or the session was already
// gone).
func strikes(err error) (strike, ok bool) {
	if err == nil {
		return false, true
	}
	if errors.Is(err, session.ErrConnectionClosed) || errors.Is(err, session.ErrServerRestarting) {
		return false, false // the actor learns of the end from the session itself
	}
	switch ClassifyFailure(err) {
	case FailureTransient, FailureClosed:
		// A request whose own connection broke (an HTTP POST that ended
		// with EOF): the session did not end, so it is a strike.
		return true, true
	case FailureCall:
		var rpcErr *protocol.Error
		// A JSON-RPC error is an answer, and so is a request for input
		// the host could not give: the connection works.
		return false, errors.As(err, &rpcErr) || errors.Is(err, session.ErrInputRequired)
	}
	return false, false
}

// isOAuthError reports whether err comes from the authorization layer.
func isOAuthError(err error) bool {
	var oe *oauth.Error
	var na *oauth.NeedsAuthError
	if errors.As(err, &oe) || errors.As(err, &na) {
		return true
	}
	for _, e := range []error{oauth.ErrNeedsLogin, oauth.ErrNoPKCE, oauth.ErrResourceMismatch, oauth.ErrIssuerMismatch,
		oauth.ErrStateMismatch, oauth.ErrNoAuthServer, oauth.ErrNoClient, oauth.ErrStepUpLimit, oauth.ErrInsecureEndpoint} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
