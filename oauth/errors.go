package oauth

import (
	"errors"
	"fmt"
)

// Errors of the package. Test with errors.Is; the richer types below
// (errors.As) wrap them.
var (
	// ErrNeedsLogin means no usable credentials exist for the server and
	// none can be obtained without the user: the authorization code flow
	// must run (mcpvisor auth login, or the host's login hook). A refresh
	// token the authorization server rejected (invalid_grant) ends here.
	ErrNeedsLogin = errors.New("oauth: authorization required (login)")

	// ErrNoPKCE means the authorization server does not advertise S256 in
	// code_challenge_methods_supported; mcpvisor refuses to run the code
	// flow without PKCE unless the server's config allows it.
	ErrNoPKCE = errors.New("oauth: the authorization server does not advertise PKCE S256")

	// ErrResourceMismatch means the protected resource metadata names
	// another resource than the MCP server's URL: authorization stops
	// before the authorization endpoint is contacted.
	ErrResourceMismatch = errors.New("oauth: protected resource metadata is for another resource")

	// ErrIssuerMismatch means authorization server metadata carries
	// another issuer than the one used to fetch it (RFC 8414 §3.3), or an
	// authorization response carries the wrong iss (RFC 9207).
	ErrIssuerMismatch = errors.New("oauth: issuer mismatch")

	// ErrStateMismatch means an authorization response's state is missing
	// or not the one sent: the response is discarded.
	ErrStateMismatch = errors.New("oauth: authorization response state mismatch")

	// ErrNoAuthServer means no authorization server could be discovered
	// for the resource and none is configured (state needs-config).
	ErrNoAuthServer = errors.New("oauth: no authorization server found")

	// ErrNoClient means no client identity is available: nothing
	// pre-registered, no client ID metadata document support and no
	// registration endpoint.
	ErrNoClient = errors.New("oauth: no client identity for the authorization server")

	// ErrStepUpLimit means a server kept answering 403 insufficient_scope
	// after the allowed number of step-up authorizations.
	ErrStepUpLimit = errors.New("oauth: step-up authorization limit reached")

	// ErrTransient means the authorization server could not be reached or
	// failed (network error, 5xx, 429): credentials are kept, and the
	// request is retried after a backoff.
	ErrTransient = errors.New("oauth: authorization server temporarily unavailable")

	// ErrBackoff means a refresh is not attempted now because the previous
	// one failed transiently and its backoff delay has not passed.
	ErrBackoff = errors.New("oauth: refresh backing off after a transient failure")

	// ErrDPoPUnsupported means the resource demands DPoP-bound tokens and
	// the authorization server lists proof algorithms without ES256, the
	// one mcpvisor signs with.
	ErrDPoPUnsupported = errors.New("oauth: the authorization server accepts no DPoP proof algorithm mcpvisor signs with (ES256)")

	// ErrWorkloadToken means the workload identity token (Config.Workload)
	// could not be read.
	ErrWorkloadToken = errors.New("oauth: workload identity token unavailable")

	// ErrInvalidConfig means NewSource was given an unusable Config (a
	// grant without what it needs, an unknown grant or DPoP mode).
	ErrInvalidConfig = errors.New("oauth: invalid configuration")

	// ErrNoSubjectToken means the token exchange had no subject token to
	// present: Config.SubjectToken failed (its error is wrapped too) or
	// returned "".
	ErrNoSubjectToken = errors.New("oauth: token exchange: no subject token")

	// ErrSubjectTokenRejected means the authorization server refused a
	// token exchange (RFC 8693) for its subject token or its client:
	// invalid_grant (the subject token expired, was revoked, is for
	// another audience or unknown to it) or unauthorized_client (this
	// client may not exchange). The error also holds the server's *Error
	// (errors.As) with its code, never the token. The source does not
	// present that subject token again; a new one (the caller's
	// refreshed token) is tried at the next request.
	ErrSubjectTokenRejected = errors.New("oauth: token exchange: the authorization server refused the subject token")

	// ErrInsecureEndpoint means an endpoint is neither HTTPS nor loopback
	// HTTP, or is not an http(s) URL at all.
	ErrInsecureEndpoint = errors.New("oauth: endpoint must be https (or http on loopback)")
)

// Error is an OAuth error response (RFC 6749 §5.2) from an authorization
// server endpoint, or a failed HTTP exchange with one. It never carries
// tokens: the response body is not kept.
type Error struct {
	// Endpoint names the endpoint ("token", "registration", …).
	Endpoint string
	// StatusCode is the HTTP status (200 for an error in a 200 body).
	StatusCode int
	// Code is the OAuth error code ("invalid_grant", …), possibly empty.
	Code        string
	Description string
	// Err is the underlying sentinel (ErrNeedsLogin, ErrTransient) or
	// transport error, if any.
	Err error
}

// Error describes the failure without any token or response body.
func (e *Error) Error() string {
	msg := fmt.Sprintf("oauth: %s endpoint", e.Endpoint)
	if e.StatusCode != 0 {
		msg += fmt.Sprintf(" answered %d", e.StatusCode)
	}
	if e.Code != "" {
		msg += ": " + e.Code
	}
	if e.Description != "" {
		msg += " (" + truncate(e.Description, 200) + ")"
	}
	if e.Err != nil && e.Code == "" {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the sentinel (ErrNeedsLogin, ErrTransient, …), if any.
func (e *Error) Unwrap() error { return e.Err }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// NeedsAuthError says that the server needs the user to authorize, and
// with which scope. It wraps ErrNeedsLogin (or ErrStepUpLimit).
type NeedsAuthError struct {
	// Scope is the scope the resource asked for, space-separated, if it
	// said.
	Scope string
	// Reason says why, for status output; never contains a token.
	Reason string
	Err    error
}

// Error says that authorization is needed, and why.
func (e *NeedsAuthError) Error() string {
	msg := "oauth: authorization required"
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	if e.Scope != "" {
		msg += " (scope " + e.Scope + ")"
	}
	return msg
}

// Unwrap returns ErrNeedsLogin, or the more precise sentinel.
func (e *NeedsAuthError) Unwrap() error {
	if e.Err == nil {
		return ErrNeedsLogin
	}
	return e.Err
}
