package mcpvisor

import (
	"net/http"

	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/transports/httpclient"
)

// asClient returns the HTTP client of a server's authorization traffic:
// guarded against internal addresses unless the server is on one (see
// oauth.NewGuardedClient), with the server's TLS settings (its custom
// roots and client certificate often serve its authorization server too).
func asClient(cfg ServerConfig, o OAuthOptions) (*http.Client, error) {
	tlsConf, err := httpclient.TLS(cfg.TLS)
	if err != nil {
		return nil, err
	}
	g := o.AddressGuard
	g.TLS = tlsConf
	return oauth.NewGuardedClient(cfg.URL, g)
}
