package oauth

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// authServer is the part of a Source that knows the authorization server
// and the source's identity at it: discovery of the resource's metadata
// and of its authorization server (discover, adopt, and the migration to
// another server, migration.go) and the client identity (clientFor:
// pre-registered, a metadata document, or a registration). Its methods
// run on the goroutine that holds src.sem, except probe (any caller of
// Login, which holds it too); what it knows is guarded by src.mu (ccOnly
// is an atomic, read without it).
type authServer struct {
	src *Source // its owner, set once by NewSource

	prm  *ResourceMetadata // the resource's metadata (nil: none published); guarded by src.mu
	meta *ServerMetadata   // the authorization server's; guarded by src.mu
	// resource is the value of the resource parameter: the PRM's
	// resource verbatim, else the canonical server URL. Guarded by
	// src.mu.
	resource string
	// ccOnly is set when the config names no grant, holds a confidential
	// pre-registered client, and the authorization server offers the
	// client_credentials grant and not the code flow: the source then
	// acts as a machine client.
	ccOnly atomic.Bool
}

// discover finds the resource's authorization server. Called with sem
// held.
func (a *authServer) discover(ctx context.Context, resourceMetadata string) error {
	s := a.src
	s.mu.Lock()
	have := a.meta != nil && (resourceMetadata == "" || a.prm == nil || a.prm.URL == resourceMetadata)
	s.mu.Unlock()
	if have {
		return nil
	}
	if err := s.gate.check(); err != nil {
		return err
	}
	err := a.discoverNow(ctx, resourceMetadata)
	s.gate.outcome(err)
	return err
}

func (a *authServer) discoverNow(ctx context.Context, resourceMetadata string) error {
	s := a.src
	prm, err := DiscoverResource(ctx, s.client, s.cfg.ServerURL, resourceMetadata)
	if err != nil {
		return err
	}
	return a.adopt(ctx, prm)
}

// adopt chooses the authorization server of the resource's metadata prm
// (nil: none published) and makes it the source's. Called with sem held.
func (a *authServer) adopt(ctx context.Context, prm *ResourceMetadata) error {
	s := a.src
	var md *ServerMetadata
	var err error
	resource := s.canonical
	switch {
	case prm != nil:
		resource = prm.Resource
		// The client chooses among the listed servers (RFC 9728 §7.6):
		// the first whose metadata can be fetched.
		var lastErr error
		for _, issuer := range prm.AuthorizationServers {
			if md, lastErr = DiscoverServer(ctx, s.client, issuer); lastErr == nil {
				break
			}
			if isTransient(lastErr) || ctx.Err() != nil {
				return lastErr
			}
		}
		if md == nil {
			return lastErr
		}
	case s.cfg.AuthServerMetadataURL != "":
		md = &ServerMetadata{}
		st, err := getJSON(ctx, s.client, s.cfg.AuthServerMetadataURL, md)
		if st != fetchOK {
			return fmt.Errorf("%w: configured metadata %s: %w", ErrNoAuthServer, s.cfg.AuthServerMetadataURL, err)
		}
		md.URL = s.cfg.AuthServerMetadataURL
		if md.Issuer == "" {
			return fmt.Errorf("%w: configured metadata %s has no issuer", ErrNoAuthServer, md.URL)
		}
		if err := md.validate(); err != nil {
			return err
		}
	default:
		if md, err = legacyServer(ctx, s.client, s.cfg.ServerURL); err != nil {
			return err
		}
	}
	a.ccOnly.Store((s.cfg.Grant == "" || s.cfg.Grant == GrantAuthorizationCode) && s.preregisteredSecret() && offersOnlyClientCredentials(md))
	s.mu.Lock()
	defer s.mu.Unlock()
	a.prm, a.meta, a.resource = prm, md, resource
	if s.entry.Issuer != md.Issuer {
		// Another authorization server: its own credentials, never the
		// previous one's.
		s.log.Info().Str("issuer", md.Issuer).Msg("authorization server discovered")
		s.entry = Entry{ServerURL: s.canonical, Issuer: md.Issuer}
		s.loaded = false
	}
	return nil
}

// client returns the client identity for the current authorization
// server: pre-registered, else a Client ID Metadata Document, else a
// stored registration, else a new dynamic registration. Called with sem
// held.
func (a *authServer) clientFor(ctx context.Context, redirectURI string) (*ClientInfo, error) {
	s := a.src
	s.mu.Lock()
	md, stored := a.meta, s.entry.Client
	s.mu.Unlock()
	switch {
	case s.cfg.ClientID != "":
		c := &ClientInfo{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Source: "preregistered"}
		if s.sign != nil {
			c.AuthMethod = AuthMethodPrivateKey
		} else {
			c.AuthMethod = chooseAuthMethod(c.ClientSecret != "", md.TokenEndpointAuthMethodsSupported)
		}
		return c, nil
	case s.cfg.ClientMetadataURL != "" && md.ClientIDMetadataDocumentSupported:
		return &ClientInfo{ClientID: s.cfg.ClientMetadataURL, AuthMethod: AuthMethodNone, Source: "cimd"}, nil
	case stored != nil && stored.Source == "dynamic" && (stored.SecretExpiresAt.IsZero() || s.now().Before(stored.SecretExpiresAt)):
		return stored, nil
	case md.RegistrationEndpoint != "":
		c, err := register(ctx, s.client, md, s.cfg.ClientName, redirectURI)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.entry.Client = c
		s.mu.Unlock()
		if err := s.save(ctx); err != nil {
			return nil, err
		}
		s.log.Info().Str("client_id", c.ClientID).Str("auth_method", c.AuthMethod).Msg("registered a client")
		return c, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrNoClient, md.Issuer)
}

// probe sends the MCP server an unauthenticated GET and returns the
// Bearer challenge of its 401, if any.
func (a *authServer) probe(ctx context.Context) (BearerChallenge, bool) {
	s := a.src
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, s.cfg.ServerURL, nil)
	if err != nil {
		return BearerChallenge{}, false
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := s.client.Do(req)
	if err != nil {
		return BearerChallenge{}, false
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return BearerChallenge{}, false
	}
	b, ok := ParseResourceChallenge(resp.Header.Values("WWW-Authenticate"))
	if b.DPoP {
		s.dpop.ask()
	}
	return b, ok
}
