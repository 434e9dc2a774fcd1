package oauth

import (
	"context"
	"errors"
	"slices"
)

// Authorization server migration (SEP-2352): a resource may move to
// another authorization server. Credentials belong to the server that
// issued them (the store keys them by issuer); after a 401 the source
// re-reads the resource's metadata, and when it no longer lists the
// server in use, it discovers the new one and registers there, never
// presenting the old server's client or tokens to it.

// reviewAuthServer re-reads the protected resource metadata after the
// resource refused a request (401). When the metadata still lists the
// authorization server in use, only the metadata is updated; otherwise
// the source adopts the newly listed server (its own entry: client and
// tokens of the old one stay with the old one). Failing to re-read is not
// an error (the known metadata stays in use), except a resource mismatch,
// which is: a resource that now names another resource must not get
// tokens. Called with sem held, after load.
func (a *authServer) reviewAuthServer(ctx context.Context, resourceMetadata string) error {
	s := a.src
	s.mu.Lock()
	md, prm := a.meta, a.prm
	s.mu.Unlock()
	if md == nil || prm == nil {
		return nil // nothing discovered yet (the discovery to come reads it), or no metadata published
	}
	if s.gate.check() != nil {
		return nil
	}
	fresh, err := DiscoverResource(ctx, s.client, s.cfg.ServerURL, resourceMetadata)
	switch {
	case errors.Is(err, ErrResourceMismatch):
		return err
	case err != nil || fresh == nil:
		s.log.Debug().Err(err).Msg("re-reading the protected resource metadata failed; keeping what is known")
		return nil
	case slices.Contains(fresh.AuthorizationServers, md.Issuer):
		s.mu.Lock()
		a.prm = fresh
		s.mu.Unlock()
		return nil
	}
	s.log.Info().Str("from", md.Issuer).Strs("to", fresh.AuthorizationServers).Msg("the resource changed its authorization server")
	err = a.adopt(ctx, fresh)
	s.gate.outcome(err)
	if err != nil {
		return err
	}
	return s.load(ctx) // the new server's stored credentials, if any
}
