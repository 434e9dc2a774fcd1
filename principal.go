package mcpvisor

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Principal is the person a request is made for, when the host serves
// several people (the gateway serves its authenticated callers). A server
// whose "oauth" settings say "credentials": "per-user" or "exchange" is
// reached, for a request that carries a principal (WithPrincipal), through
// a session of that principal's own, authorized with that principal's
// upstream tokens, never the host's or another principal's. Requests
// without a principal, and every request to a server with shared
// credentials (the default), use the server's one connection.
type Principal struct {
	// ID names the principal stably (the gateway: its token's issuer and
	// subject). Its upstream credentials are kept in OAuthOptions.Store
	// under it, and its sessions are told apart by it. Required.
	ID string
	// Name is how the principal is shown where it confirms an
	// authorization (a subject, an e-mail address). Empty: ID.
	Name string
	// AccessToken returns the principal's current access token to the
	// host: the subject token of an RFC 8693 token exchange, for servers
	// with "credentials": "exchange". Nil, or "": such servers refuse the
	// principal's requests (ErrNoSubjectToken). Called from the goroutine
	// of the request that needs it; never logged.
	AccessToken func() string
}

// DisplayName is Name, or ID when Name is empty.
func (p Principal) DisplayName() string {
	if p.Name != "" {
		return p.Name
	}
	return p.ID
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p as the principal of the requests
// made with it. A p without an ID is ignored.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	if p.ID == "" {
		return ctx
	}
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries, if any.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Credentials modes of a server ("oauth": {"credentials": …}).
const (
	// CredentialsShared (the default, also ""): every request goes
	// through the server's one connection, with the host's credentials.
	CredentialsShared = "shared"
	// CredentialsPerUser: each principal authorizes the server once, in
	// a browser (AuthorizationRequiredError), and its requests go through
	// a session of its own with its own tokens.
	CredentialsPerUser = "per-user"
	// CredentialsExchange: each principal's requests go through a session
	// of its own with a token the server's authorization server issues in
	// exchange for the principal's own access token (RFC 8693), without a
	// browser.
	CredentialsExchange = "exchange"
)

var (
	// ErrNoUserRedirect: a principal must authorize a per-user server in
	// a browser, and OAuthOptions.UserRedirectURL, where its browser
	// would come back, is not set.
	ErrNoUserRedirect = errors.New("mcpvisor: per-user authorization needs OAuthOptions.UserRedirectURL")
	// ErrNoSubjectToken: a server with "credentials": "exchange" was
	// asked for by a principal without an access token to exchange.
	ErrNoSubjectToken = errors.New("mcpvisor: no access token of the principal to exchange")
	// ErrUnknownAuthorization: CompleteAuthorization was given a redirect
	// that belongs to no pending authorization (unknown or used state, or
	// one that expired).
	ErrUnknownAuthorization = errors.New("mcpvisor: no pending authorization for this redirect")
	// ErrAuthorizationRequired matches every *AuthorizationRequiredError.
	ErrAuthorizationRequired = errors.New("mcpvisor: authorization required")
)

// AuthorizationRequiredError reports a request to a server with per-user
// credentials from a principal that has not authorized it yet (or whose
// grant has ended). The principal opens URL in a browser and authorizes;
// the authorization server redirects the browser to
// OAuthOptions.UserRedirectURL, whose handler passes the redirect to
// Supervisor.CompleteAuthorization. Requests made meanwhile get the same
// pending authorization (same Flow) until it completes or expires. It
// matches ErrAuthorizationRequired with errors.Is.
type AuthorizationRequiredError struct {
	Server    string
	Principal string // Principal.ID
	// Flow identifies the pending authorization
	// (Supervisor.PendingAuthorization).
	Flow string
	// URL is what the principal opens: OAuthOptions.UserConfirmURL for
	// this flow, else the authorization server's authorization URL. It
	// is the principal's alone (it binds the flow): show it to the
	// principal only, never log it.
	URL string
	// Expires is when the pending authorization is given up.
	Expires time.Time
}

func (e *AuthorizationRequiredError) Error() string {
	return fmt.Sprintf("mcpvisor: server %q needs your authorization: open the URL given with this error", e.Server)
}

// Is makes an AuthorizationRequiredError match ErrAuthorizationRequired.
func (e *AuthorizationRequiredError) Is(target error) bool { return target == ErrAuthorizationRequired }
