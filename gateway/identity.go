package gateway

import (
	"context"

	"github.com/mcpvisor/mcpvisor"
)

// Identity is who a downstream request comes from, as the gateway's
// inbound authentication established it: the subject and client of an
// access token and the claims access rules match on. The zero value is
// an anonymous caller (no token, or the static Options.Token, which
// names nobody).
type Identity struct {
	// Issuer is the authorization server that issued the token.
	Issuer string
	// Subject is the token's sub claim.
	Subject string
	// ClientID is the OAuth client the token was issued to (client_id or
	// azp).
	ClientID string
	// Groups and Roles are the token's group and role claims.
	Groups, Roles []string
	// Scopes are the scopes the token grants.
	Scopes []string
}

// identityKey is the context key of a request's Identity.
type identityKey struct{}

// WithIdentity returns ctx carrying id as the caller of the request it
// serves.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the caller ctx carries, and whether it carries
// one (a request that passed no inbound authentication carries none).
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// principal is the mcpvisor.Principal of a caller with this identity
// and access token: upstream servers with per-user credentials are
// reached with its own (the token is exchanged for "exchange" servers).
// An identity that names nobody (no subject, no client) is no principal.
func (id Identity) principal(token string) (mcpvisor.Principal, bool) {
	who, name := id.Subject, id.Subject
	if who == "" {
		if id.ClientID == "" {
			return mcpvisor.Principal{}, false
		}
		who, name = "client:"+id.ClientID, id.ClientID
	}
	return mcpvisor.Principal{
		ID:          id.Issuer + " " + who,
		Name:        name,
		AccessToken: func() string { return token },
	}, true
}
