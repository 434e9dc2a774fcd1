package oauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// UserAgent runs the user's part of the authorization code flow: it shows
// the authorization URL (a browser, the host's own UI, or a headless
// client in tests) and returns the query of the redirect the
// authorization server sent to RedirectURI.
type UserAgent interface {
	// RedirectURI is the redirect URI of the flow; it is fixed before the
	// client registers (a loopback listener is bound first).
	RedirectURI() string
	// Authorize shows authURL and waits for the redirect.
	Authorize(ctx context.Context, authURL string) (url.Values, error)
}

// EnterpriseConfig configures the enterprise-managed authorization
// extension (SEP-990): an identity provider's ID token is exchanged
// (RFC 8693) at the IdP for an identity assertion grant (ID-JAG), which
// the MCP server's authorization server exchanges (RFC 7523 jwt-bearer)
// for an access token.
type EnterpriseConfig struct {
	IDToken          string `json:"idToken,omitempty"` // the user's ID token from the IdP
	IdPTokenEndpoint string `json:"idpTokenEndpoint,omitempty"`
	IdPClientID      string `json:"idpClientId,omitempty"`
	IdPClientSecret  string `json:"idpClientSecret,omitempty"`
}

// WorkloadConfig is where a workload's identity token (a JWT its platform
// issues: a Kubernetes service account token, a CI job's OIDC token)
// comes from. Token is used as it is; TokenFile is read afresh for every
// token request, as platforms rotate the file.
type WorkloadConfig struct {
	Token     string `json:"token,omitempty"`
	TokenFile string `json:"tokenFile,omitempty"`
}

// Config configures a Source. ServerURL is required; the rest has usable
// zero values.
type Config struct {
	// ServerURL is the MCP server's URL.
	ServerURL string

	// ClientID and ClientSecret are a pre-registered client (tried
	// first). ClientMetadataURL is the HTTPS URL of this client's Client
	// ID Metadata Document, used as client_id with servers that support
	// it (tried second). Dynamic registration comes last.
	ClientID          string
	ClientSecret      string
	ClientMetadataURL string
	// ClientName is sent with dynamic registration. Default "mcpvisor".
	ClientName string

	// Grant is the grant used: "" or "authorization_code" (the user
	// authorizes in a browser), "client_credentials" (machine to machine,
	// pre-registered client with ClientSecret or PrivateKeyPEM),
	// GrantJWTBearer with Enterprise or Workload set, or
	// GrantTokenExchange with SubjectToken set (RFC 8693: another
	// token, typically the caller's own, is exchanged for one for this
	// server; pre-registered client with ClientSecret or PrivateKeyPEM).
	// With "" (or
	// "authorization_code") and a pre-registered confidential client, an
	// authorization server whose metadata offers client_credentials and
	// not the code flow gets client_credentials.
	Grant string
	// PrivateKeyPEM is a PKCS#8 (or EC/RSA) private key for
	// private_key_jwt client authentication; SigningAlgorithm defaults
	// from the key (ES256 for P-256, RS256 for RSA).
	PrivateKeyPEM    string
	SigningAlgorithm string
	Enterprise       *EnterpriseConfig

	// Workload configures workload identity federation (SEP-1933): with
	// Grant GrantJWTBearer and no Enterprise, the workload's own JWT,
	// issued by its platform, is presented as the jwt-bearer assertion
	// (RFC 7523 §2.1), without a browser and without a user.
	Workload *WorkloadConfig

	// SubjectToken, with Grant GrantTokenExchange, returns the token the
	// source presents as the RFC 8693 subject_token: in a gateway, the
	// calling user's current access token. It is asked afresh at every
	// exchange (the first, after expiry, after the server refused the
	// exchanged token), since callers refresh their tokens; it runs while
	// the source holds its single-flight slot, so it must not call the
	// source. An error or "" ends the exchange with ErrNoSubjectToken
	// (the error wrapped; it must not carry the token).
	//
	// Exchanged tokens are one user's and live no longer than the
	// source: it keeps them in memory only. A Store that is not a
	// *MemoryStore is not used (a file or shared store is never read
	// nor written: a token read back after a restart would outlive the
	// caller's presence, and a store keyed by server and issuer, not by
	// user, would hand one user's token to another); the source keeps a
	// MemoryStore of its own instead. A *MemoryStore given must serve
	// this one user. No refresh token is kept: an expired or refused
	// token is replaced by a new exchange. UserAgent is not used (no
	// browser flow).
	SubjectToken func(ctx context.Context) (string, error)
	// SubjectTokenType is the type of the subject token (RFC 8693 §3).
	// Default TokenTypeAccessToken.
	SubjectTokenType string
	// Audience, when set, is sent as the exchange's audience parameter
	// (RFC 8693 §2.1: the logical name of the target service), besides
	// the resource parameter.
	Audience string

	// DPoP chooses sender-constrained tokens (RFC 9449): DPoPAuto (the
	// default) when the resource asks for them, DPoPAlways, DPoPNever.
	DPoP string

	// Scopes, when set, is requested when the server's challenge names
	// no scope (instead of the resource's scopes_supported).
	Scopes []string

	// AuthServerMetadataURL is used when the resource publishes no
	// protected resource metadata (instead of the 2025-03-26 fallback).
	AuthServerMetadataURL string

	// AllowNoPKCE proceeds with servers that do not advertise
	// code_challenge_methods_supported (PKCE S256 is still sent).
	AllowNoPKCE bool

	// UserAgent, when set, lets the source run the authorization code
	// flow by itself when the server demands it (a 401 without usable
	// credentials, a 403 insufficient_scope). Nil: such a demand ends in
	// a *NeedsAuthError, and Login must be called.
	UserAgent UserAgent

	// RefreshMargin is how long before expiry a token is refreshed. The
	// margin is capped at a fifth of the token's lifetime (when the time
	// it was issued is known), so a short-lived token is used for most of
	// its life. Zero: DefaultRefreshMargin.
	RefreshMargin time.Duration
	// DefaultLifetime is assumed when a token comes without expires_in.
	// Zero: 1 h.
	DefaultLifetime time.Duration
	// MaxStepUps bounds the step-up authorizations in a row (403
	// insufficient_scope) without a successful request. Zero: 2.
	MaxStepUps int
	// RefreshBackoff is the first delay after a transient failure of the
	// authorization server, doubling up to MaxRefreshBackoff. Zero: 2 s
	// and 15 min.
	RefreshBackoff    time.Duration
	MaxRefreshBackoff time.Duration

	// HTTPClient talks to the authorization server and fetches metadata.
	// Nil: a client with a 30 s timeout.
	HTTPClient *http.Client
	// Store persists credentials. Nil: a MemoryStore. With
	// GrantTokenExchange only a *MemoryStore is used (see SubjectToken).
	Store Store
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
	// Logger receives diagnostics; never token values.
	Logger zerolog.Logger
}

// Status describes a source for status output. It holds no secrets.
type Status struct {
	Issuer       string `json:"issuer,omitempty"`
	Resource     string `json:"resource,omitempty"`
	ClientID     string `json:"clientId,omitempty"`
	ClientSource string `json:"clientSource,omitempty"`
	Authorized   bool   `json:"authorized"`
	HasRefresh   bool   `json:"hasRefreshToken,omitempty"`
	// DPoP says the token is DPoP-bound (RFC 9449).
	DPoP   bool      `json:"dpop,omitempty"`
	Expiry time.Time `json:"expiry,omitzero"`
	Scope  string    `json:"scope,omitempty"`
	// NeedScope is the scope the server asked for when it last refused
	// the credentials.
	NeedScope string `json:"needScope,omitempty"`
	// RetryAt is when the authorization server is contacted again after
	// a transient failure.
	RetryAt time.Time `json:"retryAt,omitzero"`
	// LastError is the last failure of the authorization server or the
	// authorization (no secrets in it), cleared by a success.
	LastError string `json:"lastError,omitempty"`
	// Refreshes and Authorizations count what this source did.
	Refreshes      int `json:"refreshes"`
	Authorizations int `json:"authorizations"`
}

// Source provides the access token of one MCP server: it loads it from
// the store, refreshes it ahead of expiry, answers the server's 401 and
// 403 challenges, and runs the authorization flows. It starts no
// goroutines; it is safe for concurrent use. All traffic to the
// authorization server is single-flight: one operation at a time per
// source (sem), and, for refreshes, one per store (Store.Lock) — callers
// that queued meanwhile find the new token and make no request. The
// Source itself is the token cache and the 401/403 handling; the rest of
// its work is done by its parts (see the package doc).
type Source struct {
	cfg       Config
	canonical string
	client    *http.Client
	store     Store
	now       func() time.Time
	log       zerolog.Logger
	sign      assertionSigner // nil without PrivateKeyPEM

	sem chan struct{} // held by the one goroutine talking to the AS

	// The parts, each with one job. as and grants run on the goroutine
	// that holds sem and keep their state under mu, like the token cache
	// below; gate and dpop have locks of their own, taken after mu.
	as     authServer // the authorization server and the client identity at it
	grants grants     // how a new token is obtained: code flow, machine grants, exchange
	gate   *asGate    // the backoff after the authorization server's transient failures
	dpop   dpopState  // DPoP keys and nonces (RFC 9449)

	mu sync.Mutex // guards everything below, and as's and grants' state
	// loaded is set once the store was read.
	loaded    bool
	entry     Entry           // the credentials in use (Issuer empty until known)
	challenge BearerChallenge // the latest the server sent
	needScope string
	rejected  string // an access token the server refused; not offered again
	stepUps   int
	// unconfirmed counts the authorizations since the last successful
	// request: a server that refuses every new token stops getting new
	// ones after 1+MaxStepUps.
	unconfirmed int
	refreshes   int
	authzs      int
}

// DefaultRefreshMargin is how long before expiry a token is refreshed
// when Config.RefreshMargin is zero: five minutes, as the agent SDKs do,
// capped at a fifth of the token's lifetime.
const DefaultRefreshMargin = 5 * time.Minute

// NewSource returns the token source of cfg.ServerURL.
func NewSource(cfg Config) (*Source, error) {
	canonical, err := CanonicalResource(cfg.ServerURL)
	if err != nil {
		return nil, err
	}
	if cfg.ClientName == "" {
		cfg.ClientName = "mcpvisor"
	}
	if cfg.RefreshMargin <= 0 {
		cfg.RefreshMargin = DefaultRefreshMargin
	}
	if cfg.DefaultLifetime <= 0 {
		cfg.DefaultLifetime = time.Hour
	}
	if cfg.MaxStepUps <= 0 {
		cfg.MaxStepUps = 2
	}
	if cfg.RefreshBackoff <= 0 {
		cfg.RefreshBackoff = 2 * time.Second
	}
	if cfg.MaxRefreshBackoff <= 0 {
		cfg.MaxRefreshBackoff = 15 * time.Minute
	}
	cfg.ServerURL = canonical // ws:// becomes http://, the URL of the handshake
	s := &Source{
		cfg:       cfg,
		canonical: canonical,
		client:    cfg.HTTPClient,
		store:     cfg.Store,
		now:       cfg.Now,
		log:       cfg.Logger,
		sem:       make(chan struct{}, 1),
		dpop:      dpopState{mode: cfg.DPoP},
	}
	s.as.src, s.as.resource = s, canonical
	s.grants.src = s
	if s.client == nil {
		s.client = &http.Client{Timeout: 30 * time.Second}
	}
	if _, mem := s.store.(*MemoryStore); s.store == nil || cfg.Grant == GrantTokenExchange && !mem {
		// (Exchanged tokens are kept in memory only: see SubjectToken.)
		s.store = &MemoryStore{}
	}
	if s.now == nil {
		s.now = time.Now
	}
	if cfg.PrivateKeyPEM != "" {
		if s.sign, err = newAssertionSigner(cfg.PrivateKeyPEM, cfg.SigningAlgorithm, s.now); err != nil {
			return nil, err
		}
	}
	switch cfg.Grant {
	case "", GrantAuthorizationCode:
	case GrantClientCredentials:
		if cfg.ClientID == "" || (cfg.ClientSecret == "" && cfg.PrivateKeyPEM == "") {
			return nil, fmt.Errorf("%w: client_credentials needs clientId and clientSecret or a private key", ErrInvalidConfig)
		}
	case GrantJWTBearer:
		switch {
		case cfg.Enterprise != nil && cfg.ClientID == "":
			return nil, fmt.Errorf("%w: the enterprise jwt-bearer grant needs a clientId", ErrInvalidConfig)
		case cfg.Enterprise == nil && (cfg.Workload == nil || cfg.Workload.Token == "" && cfg.Workload.TokenFile == ""):
			return nil, fmt.Errorf("%w: the jwt-bearer grant needs the enterprise settings or a workload token (or token file)", ErrInvalidConfig)
		}
	case GrantTokenExchange:
		if err := checkExchangeConfig(&cfg); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: unknown grant %q", ErrInvalidConfig, cfg.Grant)
	}
	switch cfg.DPoP {
	case DPoPAuto, DPoPAlways, DPoPNever:
	default:
		return nil, fmt.Errorf("%w: unknown DPoP mode %q (want %q, %q or empty)", ErrInvalidConfig, cfg.DPoP, DPoPAlways, DPoPNever)
	}
	s.gate = newASGate(&s.cfg, s.now, s.log)
	return s, nil
}

// ServerURL returns the canonical URL of the source's MCP server.
func (s *Source) ServerURL() string { return s.canonical }

// Interactive reports whether the source can obtain a token without the
// user (client credentials, enterprise) or with its own UserAgent.
func (s *Source) Interactive() bool {
	return s.cfg.UserAgent != nil || s.machine()
}

func (s *Source) machine() bool {
	return s.cfg.Grant == GrantClientCredentials || s.cfg.Grant == GrantJWTBearer || s.cfg.Grant == GrantTokenExchange || s.as.ccOnly.Load()
}

// preregisteredSecret reports whether the config holds a confidential
// pre-registered client (a secret or a private key).
func (s *Source) preregisteredSecret() bool {
	return s.cfg.ClientID != "" && (s.cfg.ClientSecret != "" || s.cfg.PrivateKeyPEM != "")
}

// offersOnlyClientCredentials reports whether md lists the
// client_credentials grant and not authorization_code.
func offersOnlyClientCredentials(md *ServerMetadata) bool {
	return slices.Contains(md.GrantTypesSupported, GrantClientCredentials) &&
		!slices.Contains(md.GrantTypesSupported, GrantAuthorizationCode)
}

// Status reports the source's state.
func (s *Source) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Issuer: s.entry.Issuer, Resource: s.as.resource, Scope: s.entry.Scope, NeedScope: s.needScope,
		Refreshes: s.refreshes, Authorizations: s.authzs}
	st.RetryAt, st.LastError = s.gate.state()
	if c := s.entry.Client; c != nil {
		st.ClientID, st.ClientSource = c.ClientID, c.Source
	}
	if t := s.entry.Token; t != nil && t.AccessToken != "" && t.AccessToken != s.rejected {
		st.Authorized, st.HasRefresh, st.Expiry = t.Valid(s.now()) || t.RefreshToken != "", t.RefreshToken != "", t.Expiry
		st.DPoP = t.DPoP()
	}
	return st
}

// acquire takes the single-flight slot.
func (s *Source) acquire(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Source) release() { <-s.sem }

// refreshAt is when t should be refreshed.
func (s *Source) refreshAt(t *Token, issued time.Time) time.Time {
	margin := s.cfg.RefreshMargin
	if !issued.IsZero() {
		if life := t.Expiry.Sub(issued); life > 0 && margin > life/5 {
			margin = life / 5
		}
	}
	return t.Expiry.Add(-margin)
}

// fresh reports whether the token in use needs nothing before being
// sent. Called with mu held.
func (s *Source) fresh(now time.Time) (string, bool) {
	t := s.entry.Token
	if t == nil || t.AccessToken == "" || t.AccessToken == s.rejected || !t.Valid(now) {
		return "", false
	}
	return t.AccessToken, now.Before(s.refreshAt(t, s.entry.UpdatedAt))
}

// Token returns the access token to send, refreshing it first when it is
// within the refresh margin of its expiry. It returns "" (and no error)
// when there is no token yet: the request goes without one, and the
// server's 401 starts the authorization (see Unauthorized). Errors: a
// transient failure of the authorization server while the token has
// expired (ErrTransient, ErrBackoff), with GrantTokenExchange any failure
// of the new exchange (ErrSubjectTokenRejected, ErrNoSubjectToken, the
// server's *Error), or ctx's.
func (s *Source) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	if s.loaded {
		if tok, ok := s.fresh(s.now()); ok {
			s.mu.Unlock()
			return tok, nil
		}
		if t := s.entry.Token; (t == nil || t.AccessToken == "") && !(s.machine() && s.as.meta != nil) {
			// Nothing to send and nothing to refresh: the request goes
			// without a token (a server without authorization costs no
			// more than this).
			s.mu.Unlock()
			return "", nil
		}
	}
	s.mu.Unlock()
	if err := s.acquire(ctx); err != nil {
		return "", err
	}
	defer s.release()
	if err := s.load(ctx); err != nil {
		return "", err
	}
	now := s.now()
	s.mu.Lock()
	tok, ok := s.fresh(now)
	t := s.entry.Token
	s.mu.Unlock()
	if ok {
		return tok, nil
	}
	var err error
	switch {
	case t != nil && t.RefreshToken != "":
		err = s.refresh(ctx, false)
	case s.machine() && s.as.meta != nil:
		// A machine client simply asks again (once discovery is done:
		// else the server's 401 starts it).
		err = s.grants.obtain(ctx, s.scopeFor(""))
	default:
		return tok, nil // a valid token without refresh, or none
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if nt, _ := s.fresh(now); nt != "" {
		return nt, nil
	}
	if t := s.entry.Token; t != nil && t.Valid(s.now()) && t.AccessToken != s.rejected {
		return t.AccessToken, nil // refreshed early, or kept during a transient failure
	}
	if err != nil && (isTransient(err) || errors.Is(err, ErrBackoff) || ctx.Err() != nil || s.cfg.Grant == GrantTokenExchange) {
		// (A failed exchange is the answer: a request without a token
		// would only fail again the same way.)
		return "", err
	}
	return "", nil
}

// load reads the store once. Called with sem held.
func (s *Source) load(ctx context.Context) error {
	s.mu.Lock()
	loaded := s.loaded
	s.mu.Unlock()
	if loaded {
		return nil
	}
	s.mu.Lock()
	issuer := s.entry.Issuer // once discovered, that server's entry only
	s.mu.Unlock()
	e, err := s.store.Load(ctx, s.canonical, issuer)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loaded = true
	if e != nil {
		s.entry = *e
	}
	return nil
}

// save persists the entry in use. Called with sem held.
func (s *Source) save(ctx context.Context) error {
	s.mu.Lock()
	s.entry.ServerURL = s.canonical
	s.entry.UpdatedAt = s.now()
	e := cloneEntry(&s.entry)
	s.mu.Unlock()
	if e.Issuer == "" {
		return nil
	}
	return s.store.Save(ctx, e)
}

// Unauthorized handles a 401 or 403 from the MCP server to a request
// that carried used (maybe ""), with the response's WWW-Authenticate
// values. It returns the token to retry the request with, or retry false
// with the reason: a *NeedsAuthError when the user must authorize
// (needs-auth), a transient error, or nil when the answer is not one
// authorization can fix (a 403 without insufficient_scope).
func (s *Source) Unauthorized(ctx context.Context, status int, wwwAuthenticate []string, used string) (token string, retry bool, err error) {
	b, _ := ParseResourceChallenge(wwwAuthenticate)
	if b.Error == "use_dpop_nonce" && s.dpop.rsNonce.get() != "" && s.boundToken(used) {
		// RFC 9449 §9: the resource wants its nonce in the proof; the
		// response carried it (Observe): send again, with a new proof.
		return used, true, nil
	}
	if err := s.acquire(ctx); err != nil {
		return "", false, err
	}
	defer s.release()
	if err := s.load(ctx); err != nil {
		return "", false, err
	}
	if status == http.StatusUnauthorized {
		if err := s.as.reviewAuthServer(ctx, b.ResourceMetadata); err != nil {
			return "", false, err
		}
	}
	s.mu.Lock()
	s.challenge = b
	if b.DPoP {
		s.dpop.ask()
	}
	cur := s.entry.Token
	now := s.now()
	if used != "" && status == http.StatusUnauthorized && (cur == nil || cur.AccessToken == used) {
		// Refused outright (not merely short of scope): not offered
		// again.
		s.rejected = used
	}
	// Someone refreshed or authorized while this request was out.
	if cur != nil && cur.AccessToken != used && cur.AccessToken != s.rejected && cur.Valid(now) && status == http.StatusUnauthorized {
		s.mu.Unlock()
		return cur.AccessToken, true, nil
	}
	s.mu.Unlock()

	if status == http.StatusForbidden || b.Error == "insufficient_scope" {
		if b.Error != "insufficient_scope" {
			return "", false, nil
		}
		return s.stepUp(ctx, b)
	}
	// 401: one refresh for the rejected token, else a new authorization.
	if cur != nil && cur.RefreshToken != "" {
		err := s.refresh(ctx, true)
		if err == nil {
			s.mu.Lock()
			tok := s.entry.Token.AccessToken
			s.mu.Unlock()
			return tok, true, nil
		}
		if !errors.Is(err, ErrNeedsLogin) {
			return "", false, err
		}
	}
	if !s.Interactive() && !s.preregisteredSecret() {
		return "", false, s.needsAuth(s.scopeFor(b.Scope), "the server refused the credentials", nil)
	}
	// Discovery first: the scope may come from the resource's metadata
	// (and the grant, for a confidential client, from the server's).
	if err := s.as.discover(ctx, b.ResourceMetadata); err != nil {
		return "", false, err
	}
	if err := s.grants.authorize(ctx, b.ResourceMetadata, s.scopeFor(b.Scope)); err != nil {
		return "", false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entry.Token.AccessToken, true, nil
}

// stepUp re-authorizes with the union of the scopes (403
// insufficient_scope), at most MaxStepUps times in a row.
func (s *Source) stepUp(ctx context.Context, b BearerChallenge) (string, bool, error) {
	s.mu.Lock()
	scope := unionScope(s.entry.Scope, b.Scope)
	limited := s.stepUps >= s.cfg.MaxStepUps
	if !limited && s.Interactive() {
		s.stepUps++
	}
	s.mu.Unlock()
	if limited {
		return "", false, s.needsAuth(scope, "insufficient scope after step-up", ErrStepUpLimit)
	}
	if !s.Interactive() {
		return "", false, s.needsAuth(scope, "insufficient scope", nil)
	}
	if err := s.grants.authorize(ctx, b.ResourceMetadata, scope); err != nil {
		return "", false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entry.Token.AccessToken, true, nil
}

// Succeeded tells the source a request with its token succeeded: the
// step-up count starts over.
func (s *Source) Succeeded() {
	s.mu.Lock()
	s.stepUps, s.unconfirmed = 0, 0
	s.needScope = ""
	s.mu.Unlock()
}

func (s *Source) needsAuth(scope, reason string, err error) error {
	s.mu.Lock()
	s.needScope = scope
	s.mu.Unlock()
	if err == nil {
		err = ErrNeedsLogin
	}
	return &NeedsAuthError{Scope: scope, Reason: reason, Err: err}
}

func unionScope(a, b string) string {
	out := strings.Fields(a)
	for _, s := range strings.Fields(b) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, " ")
}

// scopeFor selects the scope to request (MCP "Scope Selection
// Strategy"): the challenge's, else the configured scopes, else the
// resource's scopes_supported, else none. offline_access is added for
// the code flow when the authorization server lists it.
func (s *Source) scopeFor(challenged string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	scope := challenged
	switch {
	case scope != "":
	case len(s.cfg.Scopes) > 0:
		scope = strings.Join(s.cfg.Scopes, " ")
	case s.as.prm != nil && len(s.as.prm.ScopesSupported) > 0:
		scope = strings.Join(s.as.prm.ScopesSupported, " ")
	}
	return scope
}

// Login runs the authorization code flow with ua (or the machine grant),
// whether or not the server asked: `mcpvisor auth login`. scope overrides
// the scope selection when set.
func (s *Source) Login(ctx context.Context, ua UserAgent, scope string) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	if err := s.load(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	s.grants.machineRefused, s.unconfirmed = nil, 0 // asked anew
	s.grants.refusedSubject, s.grants.subjectRefusal = [sha256.Size]byte{}, nil
	prev := s.cfg.UserAgent
	if ua != nil {
		s.cfg.UserAgent = ua
	}
	rm := s.challenge.ResourceMetadata
	if scope == "" {
		scope = unionScope(s.needScope, s.challenge.Scope)
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cfg.UserAgent = prev
		s.mu.Unlock()
	}()
	if rm == "" {
		// No challenge seen yet: ask the server for one (its
		// resource_metadata may be the only way to its metadata).
		if b, ok := s.as.probe(ctx); ok {
			rm = b.ResourceMetadata
			if scope == "" {
				scope = b.Scope
			}
		}
	}
	if scope == "" {
		// Discovery first, for the resource's scopes_supported.
		if err := s.as.discover(ctx, rm); err != nil {
			return err
		}
		scope = s.scopeFor("")
	}
	return s.grants.authorize(ctx, rm, scope)
}

// Logout forgets the server's tokens (all issuers), keeping nothing but
// the dynamic client registrations.
func (s *Source) Logout(ctx context.Context) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	entries, err := s.store.List(ctx)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.ServerURL != s.canonical {
			continue
		}
		e.Token = nil
		if err := s.store.Save(ctx, e); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.entry.Token = nil
	s.loaded = false
	s.mu.Unlock()
	return nil
}

// Forget drops what the source knows about the authorization server
// (metadata, challenge), so that the next authorization discovers afresh.
func (s *Source) Forget() {
	s.mu.Lock()
	s.as.prm, s.as.meta = nil, nil
	s.mu.Unlock()
}

// loadIssuer reads the store's entry for the discovered issuer. Called
// with sem held, after discover.
func (s *Source) loadIssuer(ctx context.Context) error {
	s.mu.Lock()
	loaded, issuer := s.loaded, s.entry.Issuer
	s.mu.Unlock()
	if loaded {
		return nil
	}
	e, err := s.store.Load(ctx, s.canonical, issuer)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loaded = true
	if e != nil {
		s.entry = *e
	}
	return nil
}

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *Source) install(info *ClientInfo, t *Token, scope string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entry.Client = info
	s.entry.Token = t
	s.entry.UpdatedAt = s.now()
	if scope != "" {
		s.entry.Scope = scope
	}
	s.rejected = ""
	s.needScope = ""
	s.log.Info().Bool("refresh_token", t.RefreshToken != "").Time("expiry", t.Expiry).Msg("access token obtained")
}

// dropClient forgets a dynamic registration the server no longer knows
// (invalid_client), so that the next authorization registers again.
func (s *Source) dropClient(ctx context.Context, info *ClientInfo) {
	if info.Source != "dynamic" {
		return
	}
	s.mu.Lock()
	s.entry.Client, s.entry.Token = nil, nil
	s.mu.Unlock()
	_ = s.save(ctx)
}

// refresh spends the refresh token, under the store's lock, after
// re-reading the store: when another process (or source) refreshed
// meanwhile, its token is adopted and nothing is spent. force refreshes
// even a token that looks fresh (the server rejected it). Called with sem
// held.
func (s *Source) refresh(ctx context.Context, force bool) error {
	if err := s.gate.check(); err != nil {
		return err
	}
	if err := s.as.discover(ctx, ""); err != nil {
		return err
	}
	if err := s.loadIssuer(ctx); err != nil {
		return err
	}
	unlock, err := s.store.Lock(ctx, s.canonical)
	if err != nil {
		return err
	}
	defer unlock()
	s.mu.Lock()
	issuer, held := s.entry.Issuer, s.entry.Token
	s.mu.Unlock()
	if e, err := s.store.Load(ctx, s.canonical, issuer); err == nil && e != nil && e.Token != nil && held != nil &&
		e.Token.RefreshToken != held.RefreshToken {
		// Refreshed elsewhere: adopt.
		s.mu.Lock()
		s.entry = *e
		tok, fresh := s.fresh(s.now())
		s.mu.Unlock()
		if tok != "" && (fresh || !force) {
			s.log.Debug().Msg("token refreshed by another holder of the store; adopted")
			return nil
		}
	}
	s.mu.Lock()
	md, prm, resource, t, info, scope := s.as.meta, s.as.prm, s.as.resource, s.entry.Token, s.entry.Client, s.entry.Scope
	s.refreshes++
	s.mu.Unlock()
	if t == nil || t.RefreshToken == "" {
		return s.needsAuth(scope, "no refresh token", nil)
	}
	if info == nil {
		info = &ClientInfo{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, AuthMethod: AuthMethodNone}
	}
	form := url.Values{
		"grant_type":    {GrantRefreshToken},
		"refresh_token": {t.RefreshToken},
		"resource":      {resource},
	}
	key, err := s.dpop.forRequest(t, md, prm)
	if err != nil {
		return err
	}
	call := &tokenCall{client: s.client, endpoint: md.TokenEndpoint, info: info, sign: s.sign, audience: md.Issuer,
		form: form, now: s.now(), lifetime: s.cfg.DefaultLifetime, dpop: key, nonce: &s.dpop.asNonce}
	nt, _, err := call.do(ctx)
	s.gate.outcome(err)
	if err != nil {
		if isTransient(err) || ctx.Err() != nil {
			return err // credentials kept
		}
		var oe *Error
		if errors.As(err, &oe) && oe.Code == "invalid_client" {
			s.dropClient(ctx, info)
		} else {
			// The grant is over (invalid_grant, revoked): forget the
			// tokens, keep the client.
			s.mu.Lock()
			s.entry.Token = nil
			s.mu.Unlock()
			_ = s.save(ctx)
		}
		s.log.Warn().Err(err).Msg("refresh refused; login required")
		return s.needsAuth(scope, "refresh refused: "+oe.codeOr(err), nil)
	}
	if nt.RefreshToken == "" {
		nt.RefreshToken = t.RefreshToken // not rotated: keep the old one
	}
	if nt.Scope == "" {
		nt.Scope = t.Scope
	}
	s.mu.Lock()
	s.entry.Token = nt
	s.rejected = ""
	s.mu.Unlock()
	// Persist the rotated refresh token before the new access token is
	// used.
	if err := s.save(ctx); err != nil {
		return err
	}
	s.log.Debug().Time("expiry", nt.Expiry).Msg("token refreshed")
	return nil
}

func (e *Error) codeOr(err error) string {
	if e != nil && e.Code != "" {
		return e.Code
	}
	return err.Error()
}
