package mcpvisor

import (
	"context"
	"time"

	"github.com/mcpvisor/mcpvisor/oauth"
)

// OAuthOptions configure the authorization of remote servers
// (Options.OAuth). The zero value keeps credentials in memory and never
// runs a login by itself.
//
// Concurrency: Store, UserAgent, OpenURL and Now are used from the
// goroutines of every remote server at once.
type OAuthOptions struct {
	// Store persists credentials. Nil: in memory, for this supervisor.
	Store oauth.Store
	// UserAgent, when set, returns the user agent with which a server's
	// authorization code flow runs by itself when the server demands it
	// (a 401 without usable credentials, a 403 insufficient_scope): for
	// automated agents (tests, the conformance client). Nil: the server
	// parks in needs-auth until Login.
	UserAgent func(server string) oauth.UserAgent
	// OpenURL shows a login's authorization URL to the user (Login). Nil:
	// Login's caller must pass a user agent.
	OpenURL func(ctx context.Context, server, authURL string) error
	// RefreshMargin is how long before expiry tokens are refreshed (capped
	// at a fifth of their lifetime). Zero: oauth.DefaultRefreshMargin (5
	// min).
	RefreshMargin time.Duration
	// DefaultLifetime is assumed for tokens without expires_in. Zero: 1 h.
	DefaultLifetime time.Duration
	// Disabled turns authorization off: a 401 parks the server.
	Disabled bool
	// Now is the clock of token expiry. Nil: time.Now.
	Now func() time.Time
	// AddressGuard configures the client of the authorization traffic
	// (discovery, registration, token requests): unless a server is
	// itself on an internal address, that traffic refuses internal ones
	// (loopback, private, link-local…; ErrForbiddenAddress), after
	// resolution. The zero value resolves and dials with the system's
	// defaults; AllowInternal turns the check off. Its TLS member is
	// ignored: a server's own TLS settings apply.
	AddressGuard oauth.GuardOptions

	// UserRedirectURL is where the authorization servers of per-user
	// servers ("credentials": "per-user") send a principal's browser back
	// after it authorized: the host serves it and passes the redirect to
	// Supervisor.CompleteAuthorization (the gateway serves
	// /oauth/callback). Empty: principals cannot authorize such servers
	// (ErrNoUserRedirect).
	UserRedirectURL string
	// UserConfirmURL, when set, is the page a principal opens to confirm
	// a pending authorization before its browser goes on to the
	// authorization server (the gateway's /oauth/authorize):
	// AuthorizationRequiredError.URL is it with "?flow=<Flow>" appended.
	// Empty: that URL is the authorization server's own.
	UserConfirmURL string
	// UserSessionIdle is how long a principal's session with a per-user
	// server stays open unused. Zero: 10 minutes.
	UserSessionIdle time.Duration
	// MaxUserSessions bounds the principals' sessions open with one
	// server; beyond it the least recently used is closed. Zero: 256.
	MaxUserSessions int
	// UserAuthorizationTimeout is how long a principal's pending
	// authorization waits for its browser to come back. Zero: 10 minutes.
	UserAuthorizationTimeout time.Duration
}

// OAuthConfig is the "oauth" member of a server entry (client id and
// secret, scopes, callback port, grant…): ServerConfig.OAuthSettings
// parses it.
type OAuthConfig struct {
	// ClientID and ClientSecret are a client registered beforehand with
	// the server's authorization server.
	ClientID     string `json:"clientId,omitempty"`
	ClientSecret string `json:"clientSecret,omitempty"`
	// ClientMetadataURL is this client's Client ID Metadata Document
	// (an HTTPS URL), used as client_id where supported.
	ClientMetadataURL string `json:"clientMetadataUrl,omitempty"`
	// Scopes are requested when the server's challenge names none.
	Scopes []string `json:"scopes,omitempty"`
	// CallbackHost and CallbackPort are where the login's loopback
	// redirect listens. Default 127.0.0.1 and an ephemeral port.
	CallbackHost string `json:"callbackHost,omitempty"`
	CallbackPort int    `json:"callbackPort,omitempty"`
	// AuthServerMetadataURL is the authorization server metadata to use
	// when the server publishes no protected resource metadata.
	AuthServerMetadataURL string `json:"authServerMetadataUrl,omitempty"`
	// Grant is "client_credentials" for machine-to-machine access with
	// ClientSecret or PrivateKey, "jwt-bearer" with Enterprise or
	// Workload; empty means the authorization code flow.
	Grant string `json:"grant,omitempty"`
	// PrivateKey (PEM) or PrivateKeyFile authenticate the client with
	// private_key_jwt; SigningAlgorithm defaults from the key.
	PrivateKey       string `json:"privateKey,omitempty"`
	PrivateKeyFile   string `json:"privateKeyFile,omitempty"`
	SigningAlgorithm string `json:"signingAlgorithm,omitempty"`
	// AllowMissingPKCE proceeds with authorization servers that do not
	// advertise PKCE support (some enterprise servers omit the field).
	AllowMissingPKCE bool `json:"allowMissingPkce,omitempty"`
	// RefreshMarginMs overrides OAuthOptions.RefreshMargin.
	RefreshMarginMs int `json:"refreshMarginMs,omitempty"`
	// Enterprise configures the enterprise-managed grant (SEP-990).
	Enterprise *oauth.EnterpriseConfig `json:"enterprise,omitempty"`
	// Workload is the workload identity token (or the file a platform
	// keeps it in) presented with the jwt-bearer grant without a browser
	// (SEP-1933), for grant "jwt-bearer" without Enterprise.
	Workload *oauth.WorkloadConfig `json:"workload,omitempty"`
	// DPoP chooses DPoP-bound tokens (RFC 9449): "" when the server asks
	// for them, "always" whenever the authorization server supports them,
	// "never".
	DPoP string `json:"dpop,omitempty"`
	// Disabled turns authorization off for this server: a 401 parks it.
	Disabled bool `json:"disabled,omitempty"`
	// Credentials says whose credentials a request to the server goes
	// with when it is made for a principal (WithPrincipal): "" or
	// "shared" the server's own, "per-user" the principal's own (it
	// authorizes once in a browser), "exchange" a token obtained for the
	// principal by RFC 8693 token exchange.
	Credentials string `json:"credentials,omitempty"`
}

// ErrForbiddenAddress: the authorization traffic of a server on a public
// address was about to reach an internal one (loopback, private,
// link-local…, after name resolution) and was refused; see
// OAuthOptions.AddressGuard.
var ErrForbiddenAddress = oauth.ErrForbiddenAddress
