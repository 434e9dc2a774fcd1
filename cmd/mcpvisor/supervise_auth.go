package main

import (
	"github.com/mcpvisor/mcpvisor"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/authn"
	"github.com/mcpvisor/mcpvisor/management"
)

// authFlags make the gateway an OAuth 2.1 resource server (docs/gateway-auth.md).
type authFlags struct {
	issuer           string
	resource         string
	audience         string
	introspectionURL string
	clientID         string
	clientSecretFile string
	adminScope       string
	scopes           []string
	groupsClaim      string
	rolesClaim       string
}

func (af *authFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&af.issuer, "auth-issuer", "",
		"validate OAuth access tokens from the authorization server `URL` on every HTTP request (JWTs by its keys, found from its metadata); the gateway publishes its protected resource metadata")
	fl.StringVar(&af.resource, "auth-resource", "",
		"with --auth-issuer: the gateway's resource URI, the `URL` clients reach /mcp at (default http://<listen address>/mcp; required off loopback)")
	fl.StringVar(&af.audience, "auth-audience", "",
		"with --auth-issuer: the audience tokens must name (default: the resource URI)")
	fl.StringVar(&af.introspectionURL, "auth-introspection-url", "",
		"with --auth-client-id: introspect opaque tokens at `URL` (default: the issuer's introspection_endpoint)")
	fl.StringVar(&af.clientID, "auth-client-id", "",
		"with --auth-issuer: the gateway's client `ID` at the authorization server, to introspect opaque tokens")
	fl.StringVar(&af.clientSecretFile, "auth-client-secret-file", "",
		"with --auth-client-id: the gateway's client secret, in `FILE`")
	fl.StringVar(&af.adminScope, "auth-admin-scope", gateway.DefaultAdminScope,
		"with --auth-issuer: the `SCOPE` the admin API (status, metrics, events, the dashboard's actions) and the management tools need")
	fl.StringArrayVar(&af.scopes, "auth-scopes", nil,
		"with --auth-issuer: a `SCOPE` every request needs (repeatable; default none)")
	fl.StringVar(&af.groupsClaim, "auth-groups-claim", authn.DefaultGroupsClaim, "with --auth-issuer: the token claim holding the caller's groups (`NAME`)")
	fl.StringVar(&af.rolesClaim, "auth-roles-claim", authn.DefaultRolesClaim, "with --auth-issuer: the token claim holding the caller's roles (`NAME`)")
}

// authSetup is the checked resource-server configuration: the validator's
// options but for the audience, known once the listener is.
type authSetup struct {
	opts authn.Options
	f    authFlags
}

// check validates the flags (no --auth-* without --auth-issuer; a
// resource URI off loopback) and reads the client secret.
func (af authFlags) check(local bool) (*authSetup, error) {
	if af.issuer == "" {
		if af.resource != "" || af.audience != "" || af.introspectionURL != "" || af.clientID != "" || af.clientSecretFile != "" || len(af.scopes) > 0 {
			return nil, usageError("the --auth-* flags need --auth-issuer")
		}
		return nil, nil
	}
	if af.resource != "" {
		if u, err := url.Parse(af.resource); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
			return nil, usageError("--auth-resource %q: want an absolute http(s) URL without fragment", af.resource)
		}
	} else if !local {
		return nil, usageError("--auth-issuer off loopback needs --auth-resource (the URL clients reach /mcp at)")
	}
	if (af.clientID == "") != (af.clientSecretFile == "") {
		return nil, usageError("--auth-client-id and --auth-client-secret-file go together")
	}
	if af.introspectionURL != "" && af.clientID == "" {
		return nil, usageError("--auth-introspection-url needs --auth-client-id")
	}
	s := &authSetup{f: af, opts: authn.Options{Issuer: af.issuer, IntrospectionURL: af.introspectionURL, ClientID: af.clientID,
		GroupsClaim: af.groupsClaim, RolesClaim: af.rolesClaim}}
	if af.clientSecretFile != "" {
		b, err := os.ReadFile(af.clientSecretFile)
		if err != nil {
			return nil, usageError("--auth-client-secret-file: %v", err)
		}
		if s.opts.ClientSecret = strings.TrimSpace(string(b)); s.opts.ClientSecret == "" {
			return nil, usageError("--auth-client-secret-file %s is empty", af.clientSecretFile)
		}
	}
	// Audience is not known yet; check the rest now.
	probe := s.opts
	probe.Audience = "http://127.0.0.1/mcp"
	if _, err := authn.New(probe); err != nil {
		return nil, usageError("--auth-issuer: %v", err)
	}
	return s, nil
}

// resourceServer returns the gateway's resource-server options for a
// listener at listenAddr (nil without --auth-issuer); with
// --management-tools, those tools need the admin scope.
func (a *superviseCmd) resourceServer(s *authSetup, listenAddr string, mgmtTools bool) *gateway.ResourceServer {
	if s == nil || listenAddr == "" {
		return nil
	}
	resource := s.resource(listenAddr)
	opts := s.opts
	opts.Audience = s.f.audience
	if opts.Audience == "" {
		opts.Audience = resource
	}
	opts.Logger = a.libLog
	v, err := authn.New(opts)
	if err != nil { // checked by check
		a.log.Error().Err(err).Msg("token validation")
		return nil
	}
	rs := &gateway.ResourceServer{Validator: v, Resource: resource, AuthorizationServers: []string{s.f.issuer},
		Scopes: s.f.scopes, AdminScope: s.f.adminScope}
	if mgmtTools {
		for _, d := range management.Definitions() {
			rs.AdminTools = append(rs.AdminTools, d.Name)
		}
	}
	return rs
}

// resource is the gateway's resource URI: --auth-resource, else the
// MCP endpoint at the listener's address.
func (s *authSetup) resource(listenAddr string) string {
	if s.f.resource != "" {
		return s.f.resource
	}
	return "http://" + listenAddr + gateway.MCPPath
}

// userAuthorization points the supervisor's per-user authorizations at
// the gateway's pages (gateway.UserCallbackPath, UserAuthorizePath), for
// the servers whose credentials are per user; nothing without
// --auth-issuer (callers are no principals then).
func (s *authSetup) userAuthorization(listenAddr string) func(*mcpvisor.Options) {
	return func(o *mcpvisor.Options) {
		if s == nil || listenAddr == "" {
			return
		}
		redirect, confirm, err := gateway.UserAuthorizationURLs(s.resource(listenAddr))
		if err != nil {
			return // checked by check
		}
		o.OAuth.UserRedirectURL, o.OAuth.UserConfirmURL = redirect, confirm
	}
}
