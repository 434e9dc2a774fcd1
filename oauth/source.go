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
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/rs/zerolog"
	"golang.org/x/oauth2"
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
// that queued meanwhile find the new token and make no request.
type Source struct {
	cfg       Config
	canonical string
	client    *http.Client
	store     Store
	now       func() time.Time
	log       zerolog.Logger
	sign      assertionSigner // nil without PrivateKeyPEM

	sem chan struct{} // held by the one goroutine talking to the AS

	mu sync.Mutex // guards everything below
	// loaded is set once the store was read.
	loaded bool
	entry  Entry // the credentials in use (Issuer empty until known)
	prm    *ResourceMetadata
	meta   *ServerMetadata
	// resource is the value of the resource parameter: the PRM's
	// resource verbatim, else the canonical server URL.
	resource  string
	challenge BearerChallenge // the latest the server sent
	needScope string
	rejected  string // an access token the server refused; not offered again
	stepUps   int
	// unconfirmed counts the authorizations since the last successful
	// request: a server that refuses every new token stops getting new
	// ones after 1+MaxStepUps.
	unconfirmed int
	bo          *backoff.ExponentialBackOff
	retryAt     time.Time // no AS traffic before this, after a transient failure
	refreshes   int
	authzs      int
	lastErr     string // see Status.LastError
	// wantDPoP is set once the resource asked for DPoP-bound tokens (a
	// DPoP challenge, or dpop_bound_access_tokens_required).
	wantDPoP bool
	// ccOnly is set when the config names no grant, holds a confidential
	// pre-registered client, and the authorization server offers the
	// client_credentials grant and not the code flow: the source then
	// acts as a machine client.
	ccOnly atomic.Bool
	// machineRefused is the authorization server's refusal of the machine
	// grant (client credentials, jwt-bearer): the same request is not
	// sent again until Login (or a new config).
	machineRefused error
	// refusedSubject is the SHA-256 of the subject token the
	// authorization server last refused to exchange, and subjectRefusal
	// its answer: that subject token is not presented again (a new one,
	// after the caller refreshed, is).
	refusedSubject [sha256.Size]byte
	subjectRefusal error
	dpopKeys       map[string]*dpopKey // parsed DPoP keys, by their encoding

	// The latest DPoP nonces of the authorization server (token endpoint)
	// and of the resource.
	asNonce, rsNonce nonceBox
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
		resource:  canonical,
	}
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
	s.bo = s.newBackoff()
	return s, nil
}

type clockFunc func() time.Time

func (c clockFunc) Now() time.Time { return c() }

func (s *Source) newBackoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = s.cfg.RefreshBackoff
	b.MaxInterval = s.cfg.MaxRefreshBackoff
	b.Multiplier = 2
	b.RandomizationFactor = 0.2
	b.MaxElapsedTime = 0
	b.Clock = clockFunc(s.now)
	b.Reset()
	return b
}

// ServerURL returns the canonical URL of the source's MCP server.
func (s *Source) ServerURL() string { return s.canonical }

// Interactive reports whether the source can obtain a token without the
// user (client credentials, enterprise) or with its own UserAgent.
func (s *Source) Interactive() bool {
	return s.cfg.UserAgent != nil || s.machine()
}

func (s *Source) machine() bool {
	return s.cfg.Grant == GrantClientCredentials || s.cfg.Grant == GrantJWTBearer || s.cfg.Grant == GrantTokenExchange || s.ccOnly.Load()
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
	st := Status{Issuer: s.entry.Issuer, Resource: s.resource, Scope: s.entry.Scope, NeedScope: s.needScope,
		RetryAt: s.retryAt, Refreshes: s.refreshes, Authorizations: s.authzs, LastError: s.lastErr}
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
		if t := s.entry.Token; (t == nil || t.AccessToken == "") && !(s.machine() && s.meta != nil) {
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
	case s.machine() && s.meta != nil:
		// A machine client simply asks again (once discovery is done:
		// else the server's 401 starts it).
		err = s.obtain(ctx, s.scopeFor(""))
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

// gate refuses authorization server traffic during a backoff delay.
func (s *Source) gate() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.now(); now.Before(s.retryAt) {
		return fmt.Errorf("%w (next attempt in %s)", ErrBackoff, s.retryAt.Sub(now).Round(time.Second))
	}
	return nil
}

// outcome updates the backoff after authorization server traffic.
func (s *Source) outcome(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.lastErr = err.Error()
	} else {
		s.lastErr = ""
	}
	if err != nil && isTransient(err) {
		d := s.bo.NextBackOff()
		s.retryAt = s.now().Add(d)
		s.log.Warn().Err(err).Dur("retry_in", d).Msg("authorization server unavailable; backing off")
		return
	}
	if err == nil {
		s.bo.Reset()
		s.retryAt = time.Time{}
	}
}

// Unauthorized handles a 401 or 403 from the MCP server to a request
// that carried used (maybe ""), with the response's WWW-Authenticate
// values. It returns the token to retry the request with, or retry false
// with the reason: a *NeedsAuthError when the user must authorize
// (needs-auth), a transient error, or nil when the answer is not one
// authorization can fix (a 403 without insufficient_scope).
func (s *Source) Unauthorized(ctx context.Context, status int, wwwAuthenticate []string, used string) (token string, retry bool, err error) {
	b, _ := ParseResourceChallenge(wwwAuthenticate)
	if b.Error == "use_dpop_nonce" && s.rsNonce.get() != "" && s.boundToken(used) {
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
		if err := s.reviewAuthServer(ctx, b.ResourceMetadata); err != nil {
			return "", false, err
		}
	}
	s.mu.Lock()
	s.challenge = b
	if b.DPoP {
		s.wantDPoP = true
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
	if err := s.discover(ctx, b.ResourceMetadata); err != nil {
		return "", false, err
	}
	if err := s.authorize(ctx, b.ResourceMetadata, s.scopeFor(b.Scope)); err != nil {
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
	if err := s.authorize(ctx, b.ResourceMetadata, scope); err != nil {
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
	case s.prm != nil && len(s.prm.ScopesSupported) > 0:
		scope = strings.Join(s.prm.ScopesSupported, " ")
	}
	return scope
}

func (s *Source) withOfflineAccess(scope string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.machine() || scope == "" && s.meta == nil {
		return scope
	}
	if s.meta != nil && slices.Contains(s.meta.ScopesSupported, "offline_access") {
		return unionScope(scope, "offline_access")
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
	s.machineRefused, s.unconfirmed = nil, 0 // asked anew
	s.refusedSubject, s.subjectRefusal = [sha256.Size]byte{}, nil
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
		if b, ok := s.probe(ctx); ok {
			rm = b.ResourceMetadata
			if scope == "" {
				scope = b.Scope
			}
		}
	}
	if scope == "" {
		// Discovery first, for the resource's scopes_supported.
		if err := s.discover(ctx, rm); err != nil {
			return err
		}
		scope = s.scopeFor("")
	}
	return s.authorize(ctx, rm, scope)
}

// probe sends the MCP server an unauthenticated GET and returns the
// Bearer challenge of its 401, if any.
func (s *Source) probe(ctx context.Context) (BearerChallenge, bool) {
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
		s.mu.Lock()
		s.wantDPoP = true
		s.mu.Unlock()
	}
	return b, ok
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
	s.prm, s.meta = nil, nil
	s.mu.Unlock()
}

// discover finds the resource's authorization server. Called with sem
// held.
func (s *Source) discover(ctx context.Context, resourceMetadata string) error {
	s.mu.Lock()
	have := s.meta != nil && (resourceMetadata == "" || s.prm == nil || s.prm.URL == resourceMetadata)
	s.mu.Unlock()
	if have {
		return nil
	}
	if err := s.gate(); err != nil {
		return err
	}
	err := s.discoverNow(ctx, resourceMetadata)
	s.outcome(err)
	return err
}

func (s *Source) discoverNow(ctx context.Context, resourceMetadata string) error {
	prm, err := DiscoverResource(ctx, s.client, s.cfg.ServerURL, resourceMetadata)
	if err != nil {
		return err
	}
	return s.adopt(ctx, prm)
}

// adopt chooses the authorization server of the resource's metadata prm
// (nil: none published) and makes it the source's. Called with sem held.
func (s *Source) adopt(ctx context.Context, prm *ResourceMetadata) error {
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
	s.ccOnly.Store((s.cfg.Grant == "" || s.cfg.Grant == GrantAuthorizationCode) && s.preregisteredSecret() && offersOnlyClientCredentials(md))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prm, s.meta, s.resource = prm, md, resource
	if s.entry.Issuer != md.Issuer {
		// Another authorization server: its own credentials, never the
		// previous one's.
		s.log.Info().Str("issuer", md.Issuer).Msg("authorization server discovered")
		s.entry = Entry{ServerURL: s.canonical, Issuer: md.Issuer}
		s.loaded = false
	}
	return nil
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

// authorize obtains a new token: the machine grant, or the code flow with
// the UserAgent. Called with sem held.
func (s *Source) authorize(ctx context.Context, resourceMetadata, scope string) error {
	if err := s.discover(ctx, resourceMetadata); err != nil {
		return err
	}
	if err := s.loadIssuer(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	ua := s.cfg.UserAgent
	loop := s.unconfirmed >= 1+s.cfg.MaxStepUps
	if !loop && !(s.machine() && s.machineRefused != nil) {
		s.unconfirmed++ // (a refused machine grant makes no request: obtain says so)
	}
	s.mu.Unlock()
	if loop {
		return s.needsAuth(scope, "the server refused every new authorization", ErrStepUpLimit)
	}
	if s.machine() {
		return s.obtain(ctx, scope)
	}
	if ua == nil {
		return s.needsAuth(scope, "login required", nil)
	}
	return s.codeFlow(ctx, ua, scope)
}

// client returns the client identity for the current authorization
// server: pre-registered, else a Client ID Metadata Document, else a
// stored registration, else a new dynamic registration. Called with sem
// held.
func (s *Source) clientFor(ctx context.Context, redirectURI string) (*ClientInfo, error) {
	s.mu.Lock()
	md, stored := s.meta, s.entry.Client
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

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// codeFlow runs the authorization code flow with PKCE. Called with sem
// held.
func (s *Source) codeFlow(ctx context.Context, ua UserAgent, scope string) error {
	s.mu.Lock()
	md, resource := s.meta, s.resource
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
	scope = s.withOfflineAccess(scope)
	redirect := ua.RedirectURI()
	info, err := s.clientFor(ctx, redirect)
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
	return s.exchange(ctx, info, form, scope)
}

// exchange calls the token endpoint and installs the token. Called with
// sem held.
func (s *Source) exchange(ctx context.Context, info *ClientInfo, form url.Values, scope string) error {
	s.mu.Lock()
	md := s.meta
	s.mu.Unlock()
	now := s.now()
	key, err := s.dpopFor(nil)
	if err != nil {
		return err
	}
	call := &tokenCall{client: s.client, endpoint: md.TokenEndpoint, info: info, sign: s.sign, audience: md.Issuer,
		form: form, now: now, lifetime: s.cfg.DefaultLifetime, dpop: key, nonce: &s.asNonce}
	t, tr, err := call.do(ctx)
	if err == nil && form.Get("grant_type") == GrantTokenExchange {
		err = checkExchanged(tr)
		t.RefreshToken = "" // never used: the source exchanges again
	}
	s.outcome(err)
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

// obtain runs the machine grant (client credentials, the enterprise
// token exchange then jwt-bearer, or the token exchange). Called with sem
// held.
func (s *Source) obtain(ctx context.Context, scope string) error {
	if s.cfg.Grant == GrantTokenExchange {
		return s.tokenExchange(ctx, scope)
	}
	if err := s.gate(); err != nil {
		return err
	}
	s.mu.Lock()
	md, resource, refused := s.meta, s.resource, s.machineRefused
	if refused == nil {
		s.authzs++
	}
	s.mu.Unlock()
	if refused != nil {
		// Not asked again with the same request (SEP-1933: no retry, no
		// other grant), until Login or a new config.
		return &NeedsAuthError{Scope: scope, Reason: "the authorization server refused the " + s.grantName() + " grant", Err: fmt.Errorf("%w: %w", ErrNeedsLogin, refused)}
	}
	err := s.obtainWith(ctx, md, resource, scope)
	if err == nil || isTransient(err) || ctx.Err() != nil || errors.Is(err, ErrBackoff) {
		return err
	}
	var oe *Error
	if !errors.As(err, &oe) {
		return err // not the server's answer (a config problem): nothing learnt
	}
	s.mu.Lock()
	s.machineRefused = err
	s.mu.Unlock()
	s.log.Warn().Err(err).Msg("the authorization server refused the machine grant; not asking again until login")
	return &NeedsAuthError{Scope: scope, Reason: "the authorization server refused the " + s.grantName() + " grant", Err: fmt.Errorf("%w: %w", ErrNeedsLogin, err)}
}

// grantName names the machine grant for messages.
func (s *Source) grantName() string {
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
func (s *Source) preregistered(md *ServerMetadata) *ClientInfo {
	info := &ClientInfo{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Source: "preregistered"}
	if s.sign != nil {
		info.AuthMethod = AuthMethodPrivateKey
	} else {
		info.AuthMethod = chooseAuthMethod(info.ClientSecret != "", md.TokenEndpointAuthMethodsSupported)
	}
	return info
}

// obtainWith requests the machine grant's token once.
func (s *Source) obtainWith(ctx context.Context, md *ServerMetadata, resource, scope string) error {
	info := s.preregistered(md)
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
			assertion, err = s.identityAssertion(ctx, md.Issuer, resource, scope)
			if err != nil {
				s.outcome(err)
				return err
			}
		} else if assertion, err = s.workloadToken(); err != nil {
			return err
		}
		form.Set("grant_type", GrantJWTBearer)
		form.Set("assertion", assertion)
	}
	return s.exchange(ctx, info, form, scope)
}

// workloadToken returns the workload's identity token (Config.Workload),
// reading its file afresh.
func (s *Source) workloadToken() (string, error) {
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
func (s *Source) identityAssertion(ctx context.Context, audience, resource, scope string) (string, error) {
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

// refresh spends the refresh token, under the store's lock, after
// re-reading the store: when another process (or source) refreshed
// meanwhile, its token is adopted and nothing is spent. force refreshes
// even a token that looks fresh (the server rejected it). Called with sem
// held.
func (s *Source) refresh(ctx context.Context, force bool) error {
	if err := s.gate(); err != nil {
		return err
	}
	if err := s.discover(ctx, ""); err != nil {
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
	md, resource, t, info, scope := s.meta, s.resource, s.entry.Token, s.entry.Client, s.entry.Scope
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
	key, err := s.dpopFor(t)
	if err != nil {
		return err
	}
	call := &tokenCall{client: s.client, endpoint: md.TokenEndpoint, info: info, sign: s.sign, audience: md.Issuer,
		form: form, now: s.now(), lifetime: s.cfg.DefaultLifetime, dpop: key, nonce: &s.asNonce}
	nt, _, err := call.do(ctx)
	s.outcome(err)
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
