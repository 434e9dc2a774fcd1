package oauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"golang.org/x/oauth2"
)

// grants is the part of a Source that obtains a new token: the
// authorization code flow with the user (codeFlow), the machine grants
// (client credentials, the enterprise and workload jwt-bearer grants) and
// the token exchange (exchange.go), each ending at the token endpoint
// (exchange), whose token it installs in the source's cache. Its methods
// run on the goroutine that holds src.sem (the source's single-flight
// slot); the refusals it remembers are guarded by src.mu, like the rest of
// the source's state.
type grants struct {
	src *Source // its owner, set once by NewSource

	// machineRefused is the authorization server's refusal of the machine
	// grant (client credentials, jwt-bearer): the same request is not
	// sent again until Login (or a new config). Guarded by src.mu.
	machineRefused error
	// refusedSubject is the SHA-256 of the subject token the
	// authorization server last refused to exchange, and subjectRefusal
	// its answer: that subject token is not presented again (a new one,
	// after the caller refreshed, is). Guarded by src.mu.
	refusedSubject [sha256.Size]byte
	subjectRefusal error
}

// authorize obtains a new token: the machine grant, or the code flow with
// the UserAgent. Called with sem held.
func (g *grants) authorize(ctx context.Context, resourceMetadata, scope string) error {
	s := g.src
	if err := s.as.discover(ctx, resourceMetadata); err != nil {
		return err
	}
	if err := s.loadIssuer(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	ua := s.cfg.UserAgent
	loop := s.unconfirmed >= 1+s.cfg.MaxStepUps
	if !loop && !(s.machine() && g.machineRefused != nil) {
		s.unconfirmed++ // (a refused machine grant makes no request: obtain says so)
	}
	s.mu.Unlock()
	if loop {
		return s.needsAuth(scope, "the server refused every new authorization", ErrStepUpLimit)
	}
	if s.machine() {
		return g.obtain(ctx, scope)
	}
	if ua == nil {
		return s.needsAuth(scope, "login required", nil)
	}
	return g.codeFlow(ctx, ua, scope)
}

// codeFlow runs the authorization code flow with PKCE. Called with sem
// held.
func (g *grants) codeFlow(ctx context.Context, ua UserAgent, scope string) error {
	s := g.src
	s.mu.Lock()
	md, resource := s.as.meta, s.as.resource
	s.authzs++
	s.mu.Unlock()
	if md.AuthorizationEndpoint == "" {
		return fmt.Errorf("%w: %s has no authorization_endpoint", ErrNoAuthServer, md.Issuer)
	}
	if !slices.Contains(md.CodeChallengeMethodsSupported, "S256") && !s.cfg.AllowNoPKCE {
		return fmt.Errorf("%w (%s)", ErrNoPKCE, md.Issuer)
	}
	if err := checkEndpoint(md.AuthorizationEndpoint); err != nil {
		return err
	}
	scope = g.withOfflineAccess(scope)
	redirect := ua.RedirectURI()
	info, err := s.as.clientFor(ctx, redirect)
	if err != nil {
		return err
	}
	verifier := oauth2.GenerateVerifier()
	state := randomString(24)
	au, err := url.Parse(md.AuthorizationEndpoint)
	if err != nil {
		return err
	}
	q := au.Query()
	q.Set("response_type", "code")
	q.Set("client_id", info.ClientID)
	q.Set("redirect_uri", redirect)
	q.Set("state", state)
	q.Set("code_challenge", oauth2.S256ChallengeFromVerifier(verifier))
	q.Set("code_challenge_method", "S256")
	q.Set("resource", resource)
	if scope != "" {
		q.Set("scope", scope)
	}
	au.RawQuery = q.Encode()
	s.log.Info().Str("issuer", md.Issuer).Str("scope", scope).Msg("authorization requested")
	back, err := ua.Authorize(ctx, au.String())
	if err != nil {
		return fmt.Errorf("oauth: authorization: %w", err)
	}
	// RFC 9207: the issuer first, so that a mix-up attacker's error is
	// not even read.
	if iss, ok := back["iss"]; ok {
		if len(iss) != 1 || iss[0] != md.Issuer {
			return fmt.Errorf("%w: authorization response from %q, expected %q", ErrIssuerMismatch, back.Get("iss"), md.Issuer)
		}
	} else if md.AuthorizationResponseISSParameterSupported {
		return fmt.Errorf("%w: the authorization response has no iss although %s advertises it", ErrIssuerMismatch, md.Issuer)
	}
	if back.Get("state") != state {
		return ErrStateMismatch
	}
	if e := back.Get("error"); e != "" {
		return &Error{Endpoint: "authorization", Code: e, Description: back.Get("error_description"), Err: ErrNeedsLogin}
	}
	code := back.Get("code")
	if code == "" {
		return &Error{Endpoint: "authorization", Code: "invalid_response", Description: "no code in the redirect"}
	}
	form := url.Values{
		"grant_type":    {GrantAuthorizationCode},
		"code":          {code},
		"redirect_uri":  {redirect},
		"code_verifier": {verifier},
		"resource":      {resource},
	}
	return g.exchange(ctx, info, form, scope)
}

func (g *grants) withOfflineAccess(scope string) string {
	s := g.src
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.machine() || scope == "" && s.as.meta == nil {
		return scope
	}
	if s.as.meta != nil && slices.Contains(s.as.meta.ScopesSupported, "offline_access") {
		return unionScope(scope, "offline_access")
	}
	return scope
}

// exchange calls the token endpoint and installs the token. Called with
// sem held.
func (g *grants) exchange(ctx context.Context, info *ClientInfo, form url.Values, scope string) error {
	s := g.src
	s.mu.Lock()
	md, prm := s.as.meta, s.as.prm
	s.mu.Unlock()
	now := s.now()
	key, err := s.dpop.forRequest(nil, md, prm)
	if err != nil {
		return err
	}
	call := &tokenCall{client: s.client, endpoint: md.TokenEndpoint, info: info, sign: s.sign, audience: md.Issuer,
		form: form, now: now, lifetime: s.cfg.DefaultLifetime, dpop: key, nonce: &s.dpop.asNonce}
	t, tr, err := call.do(ctx)
	if err == nil && form.Get("grant_type") == GrantTokenExchange {
		err = checkExchanged(tr)
		t.RefreshToken = "" // never used: the source exchanges again
	}
	s.gate.outcome(err)
	if err != nil {
		var oe *Error
		if errors.As(err, &oe) && oe.Code == "invalid_client" {
			s.dropClient(ctx, info)
		}
		return err
	}
	s.install(info, t, scope)
	return s.save(ctx)
}

// obtain runs the machine grant (client credentials, the enterprise
// token exchange then jwt-bearer, or the token exchange). Called with sem
// held.
func (g *grants) obtain(ctx context.Context, scope string) error {
	s := g.src
	if s.cfg.Grant == GrantTokenExchange {
		return g.tokenExchange(ctx, scope)
	}
	if err := s.gate.check(); err != nil {
		return err
	}
	s.mu.Lock()
	md, resource, refused := s.as.meta, s.as.resource, g.machineRefused
	if refused == nil {
		s.authzs++
	}
	s.mu.Unlock()
	if refused != nil {
		// Not asked again with the same request (SEP-1933: no retry, no
		// other grant), until Login or a new config.
		return &NeedsAuthError{Scope: scope, Reason: "the authorization server refused the " + g.grantName() + " grant", Err: fmt.Errorf("%w: %w", ErrNeedsLogin, refused)}
	}
	err := g.obtainWith(ctx, md, resource, scope)
	if err == nil || isTransient(err) || ctx.Err() != nil || errors.Is(err, ErrBackoff) {
		return err
	}
	var oe *Error
	if !errors.As(err, &oe) {
		return err // not the server's answer (a config problem): nothing learnt
	}
	s.mu.Lock()
	g.machineRefused = err
	s.mu.Unlock()
	s.log.Warn().Err(err).Msg("the authorization server refused the machine grant; not asking again until login")
	return &NeedsAuthError{Scope: scope, Reason: "the authorization server refused the " + g.grantName() + " grant", Err: fmt.Errorf("%w: %w", ErrNeedsLogin, err)}
}

// grantName names the machine grant for messages.
func (g *grants) grantName() string {
	s := g.src
	switch {
	case s.cfg.Grant != GrantJWTBearer:
		return "client_credentials"
	case s.cfg.Enterprise != nil:
		return "enterprise jwt-bearer"
	}
	return "workload jwt-bearer"
}

// preregistered is the configured client, authenticating at md's token
// endpoint with its private key or secret.
func (g *grants) preregistered(md *ServerMetadata) *ClientInfo {
	s := g.src
	info := &ClientInfo{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Source: "preregistered"}
	if s.sign != nil {
		info.AuthMethod = AuthMethodPrivateKey
	} else {
		info.AuthMethod = chooseAuthMethod(info.ClientSecret != "", md.TokenEndpointAuthMethodsSupported)
	}
	return info
}

// obtainWith requests the machine grant's token once.
func (g *grants) obtainWith(ctx context.Context, md *ServerMetadata, resource, scope string) error {
	s := g.src
	info := g.preregistered(md)
	form := url.Values{"resource": {resource}}
	if scope != "" {
		form.Set("scope", scope)
	}
	switch s.cfg.Grant {
	case GrantClientCredentials, "", GrantAuthorizationCode: // the last two: a server that offers client credentials only
		form.Set("grant_type", GrantClientCredentials)
	case GrantJWTBearer:
		var assertion string
		var err error
		if s.cfg.Enterprise != nil {
			assertion, err = g.identityAssertion(ctx, md.Issuer, resource, scope)
			if err != nil {
				s.gate.outcome(err)
				return err
			}
		} else if assertion, err = g.workloadToken(); err != nil {
			return err
		}
		form.Set("grant_type", GrantJWTBearer)
		form.Set("assertion", assertion)
	}
	return g.exchange(ctx, info, form, scope)
}

// workloadToken returns the workload's identity token (Config.Workload),
// reading its file afresh.
func (g *grants) workloadToken() (string, error) {
	s := g.src
	w := s.cfg.Workload
	if w.Token != "" {
		return w.Token, nil
	}
	b, err := os.ReadFile(w.TokenFile)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrWorkloadToken, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%w: %s is empty", ErrWorkloadToken, w.TokenFile)
	}
	return tok, nil
}

// identityAssertion exchanges the IdP's ID token for an ID-JAG (RFC 8693)
// at the IdP's token endpoint.
func (g *grants) identityAssertion(ctx context.Context, audience, resource, scope string) (string, error) {
	s := g.src
	e := s.cfg.Enterprise
	form := url.Values{
		"grant_type":           {GrantTokenExchange},
		"subject_token":        {e.IDToken},
		"subject_token_type":   {TokenTypeIDToken},
		"requested_token_type": {"urn:ietf:params:oauth:token-type:id-jag"},
		"audience":             {audience},
		"resource":             {resource},
	}
	if scope != "" {
		form.Set("scope", scope)
	}
	info := &ClientInfo{ClientID: e.IdPClientID, ClientSecret: e.IdPClientSecret}
	info.AuthMethod = chooseAuthMethod(info.ClientSecret != "", nil)
	call := &tokenCall{client: s.client, endpoint: e.IdPTokenEndpoint, info: info, form: form, now: s.now(),
		lifetime: s.cfg.DefaultLifetime, name: "identity provider token"}
	if info.ClientID == "" {
		call.info = nil
	}
	t, _, err := call.do(ctx)
	if err != nil {
		return "", err
	}
	return t.AccessToken, nil
}
