package mcpvisor

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/oauth"
)

// OAuthOptions configure the authorization of remote servers
// (Options.OAuth): the credential store, a login hook to show
// authorization URLs the host's own way, refresh timing.
type OAuthOptions = actors.OAuthOptions

// OAuthConfig is the "oauth" member of a server entry (client id and
// secret, scopes, callback port, grant…).
type OAuthConfig = actors.OAuthConfig

// AuthStatus is a server's authorization state in ServerStatus.Auth.
type AuthStatus = oauth.Status

// Login authorizes server name and reconnects it. ua runs the user's part
// of the authorization code flow; nil means a loopback redirect on
// 127.0.0.1 with the URL shown through Options.OAuth.OpenURL (a browser,
// or the host's own prompt). Servers with a machine grant
// (client_credentials) need no user agent.
func (s *Supervisor) Login(ctx context.Context, name string, ua oauth.UserAgent) error {
	return s.sys.Login(ctx, name, ua)
}

// NewAuthSource returns the OAuth token source of a remote server, as the
// supervisor builds it: for tools that authorize outside a supervisor
// (mcpvisor auth login). Credentials go to o.Store.
func NewAuthSource(name string, cfg ServerConfig, o OAuthOptions, log zerolog.Logger) (*oauth.Source, error) {
	return actors.NewAuthSource(name, cfg.plain(), o, nil, log)
}

// ErrForbiddenAddress: the authorization traffic of a server on a public
// address was about to reach an internal one (loopback, private,
// link-local…, after name resolution) and was refused; see
// OAuthOptions.AddressGuard.
var ErrForbiddenAddress = oauth.ErrForbiddenAddress
