package authn

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/gateway"
)

// Defaults of Options.
const (
	DefaultLeeway             = 30 * time.Second
	DefaultKeysMaxAge         = time.Hour
	DefaultKeysMinRefetch     = 30 * time.Second
	DefaultIntrospectionCache = 30 * time.Second
	DefaultVerifiedCache      = time.Minute
	DefaultCacheSize          = 10000
	DefaultGroupsClaim        = "groups"
	DefaultRolesClaim         = "roles"
)

// Options configure a Validator. Issuer and Audience are required; the
// zero value of every other field is a sane default.
type Options struct {
	// Issuer is the authorization server's issuer identifier: its
	// metadata is discovered from it, and a JWT's iss must equal it.
	Issuer string
	// Audience is the gateway's resource URI (the canonical URI of its
	// MCP endpoint, RFC 8707): a token's aud must contain it.
	Audience string
	// JWKSURL overrides the jwks_uri of the issuer's metadata.
	JWKSURL string
	// IntrospectionURL overrides the introspection_endpoint of the
	// issuer's metadata. Opaque tokens are introspected only when
	// ClientID is set (the endpoint wants the gateway's credentials).
	IntrospectionURL string
	// ClientID and ClientSecret are the gateway's own client credentials
	// at the authorization server, sent to the introspection endpoint
	// (HTTP Basic, RFC 6749 §2.3.1).
	ClientID, ClientSecret string
	// GroupsClaim and RolesClaim name the claims read into
	// Identity.Groups and Identity.Roles (default "groups" and "roles";
	// a string or an array of strings).
	GroupsClaim, RolesClaim string
	// Leeway is the clock skew allowed on exp, nbf and iat (default
	// DefaultLeeway; negative: none).
	Leeway time.Duration
	// KeysMaxAge is how long a fetched key set is used before it is
	// fetched again (key rotation; default DefaultKeysMaxAge).
	KeysMaxAge time.Duration
	// KeysMinRefetch is the least time between two fetches caused by a
	// token naming an unknown key (default DefaultKeysMinRefetch), so
	// that forged kids cannot make the gateway hammer the issuer.
	KeysMinRefetch time.Duration
	// IntrospectionCache is how long an active introspection answer is
	// reused (default DefaultIntrospectionCache; negative: never).
	IntrospectionCache time.Duration
	// VerifiedCache is how long a JWT that passed every check is
	// remembered (by its SHA-256), so that a client's next calls with it
	// cost a hash instead of a signature verification (default
	// DefaultVerifiedCache; negative: never). exp is checked at every
	// use; a key removed from the issuer's set stops admitting its
	// tokens within this time.
	VerifiedCache time.Duration
	// CacheSize bounds the tokens each cache keeps (default
	// DefaultCacheSize; the least recently used goes first).
	CacheSize int
	// HTTPClient fetches metadata and keys and introspects (default: a
	// client with a 10 s timeout).
	HTTPClient *http.Client
	// Now is the clock (default time.Now); tests inject theirs.
	Now func() time.Time
	// Logger receives the key fetches and their failures (never a token).
	Logger zerolog.Logger
}

// Validator validates access tokens for one issuer and audience; it
// implements gateway.TokenValidator. Create it with New.
//
// Concurrency: safe for concurrent use. keys is replaced whole (never
// mutated) by the one fetch fetchMu admits at a time; meta is guarded by
// fetchMu too; each cache has its own lock.
type Validator struct {
	opts   Options
	client *http.Client
	now    func() time.Time

	keys    atomic.Pointer[keySet]
	fetchMu sync.Mutex
	meta    *serverMetadata // discovered once; guarded by fetchMu

	cache    *tokenCache // active introspection answers
	verified *tokenCache // JWTs that passed every check
}

// keySet is one fetch of the issuer's JWKS.
type keySet struct {
	keys    []verifyKey
	fetched time.Time
}

// ErrConfig is returned by New for unusable Options.
var ErrConfig = errors.New("authn: invalid options")

// New returns a Validator for opts. It does not contact the issuer: the
// metadata and keys are fetched at the first token, so that a gateway
// starts while its authorization server is down.
func New(opts Options) (*Validator, error) {
	if opts.Issuer == "" || opts.Audience == "" {
		return nil, fmt.Errorf("%w: Issuer and Audience are required", ErrConfig)
	}
	if _, err := metadataURLs(opts.Issuer); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if opts.GroupsClaim == "" {
		opts.GroupsClaim = DefaultGroupsClaim
	}
	if opts.RolesClaim == "" {
		opts.RolesClaim = DefaultRolesClaim
	}
	if opts.Leeway == 0 {
		opts.Leeway = DefaultLeeway
	} else if opts.Leeway < 0 {
		opts.Leeway = 0
	}
	if opts.KeysMaxAge <= 0 {
		opts.KeysMaxAge = DefaultKeysMaxAge
	}
	if opts.KeysMinRefetch <= 0 {
		opts.KeysMinRefetch = DefaultKeysMinRefetch
	}
	if opts.IntrospectionCache == 0 {
		opts.IntrospectionCache = DefaultIntrospectionCache
	}
	if opts.VerifiedCache == 0 {
		opts.VerifiedCache = DefaultVerifiedCache
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	v := &Validator{opts: opts, client: opts.HTTPClient, now: opts.Now}
	if v.client == nil {
		v.client = &http.Client{Timeout: 10 * time.Second}
	}
	if v.now == nil {
		v.now = time.Now
	}
	v.cache = newTokenCache(opts.CacheSize)
	v.verified = newTokenCache(opts.CacheSize)
	return v, nil
}

// ValidateToken returns the Identity of the caller token names, or an
// error: a *TokenError matching gateway.ErrInvalidToken for a refused
// token, one matching gateway.ErrAuthUnavailable when the issuer could
// not be asked. A JWT is validated locally; any other token is
// introspected when client credentials are configured, else refused.
func (v *Validator) ValidateToken(ctx context.Context, token string) (gateway.Identity, error) {
	if token == "" {
		return gateway.Identity{}, refuse(ErrMalformed, "empty token")
	}
	if !looksLikeJWT(token) {
		if v.opts.ClientID == "" {
			return gateway.Identity{}, refuse(ErrMalformed, "not a JWT, and no introspection is configured")
		}
		return v.introspect(ctx, token)
	}
	var sum [32]byte
	if v.opts.VerifiedCache > 0 && len(token) <= MaxTokenSize {
		sum = sha256.Sum256([]byte(token))
		if id, ok := v.verified.get(sum, v.now()); ok {
			return id, nil
		}
	}
	jt, err := parseJWT(token)
	if err != nil {
		return gateway.Identity{}, err
	}
	key, err := v.keyFor(ctx, jt)
	if err != nil {
		return gateway.Identity{}, err
	}
	if !key.verify(jt) {
		return gateway.Identity{}, refuse(ErrSignature, "")
	}
	var c claims
	if err := strictJSON(jt.payload, &c.raw); err != nil {
		return gateway.Identity{}, refuse(ErrMalformed, "claims are not a JSON object")
	}
	if err := v.checkClaims(c, true); err != nil {
		return gateway.Identity{}, err
	}
	if _, bound := c.raw["cnf"]; bound {
		// RFC 9449 §7.2: a DPoP-bound token is not a bearer token.
		return gateway.Identity{}, refuse(ErrSenderConstrained, "")
	}
	id := v.identity(c)
	if v.opts.VerifiedCache > 0 {
		now := v.now()
		until := now.Add(v.opts.VerifiedCache)
		if exp, _ := c.time("exp"); exp.Add(v.opts.Leeway).Before(until) {
			until = exp.Add(v.opts.Leeway)
		}
		v.verified.put(sum, id, until)
	}
	return id, nil
}

// keyFor finds the key that is to verify jt: by kid, else the only key
// allowing its alg. An unknown kid (or an old set) fetches the set again.
func (v *Validator) keyFor(ctx context.Context, jt *compactJWT) (verifyKey, error) {
	ks := v.keys.Load()
	now := v.now()
	if ks == nil || now.Sub(ks.fetched) >= v.opts.KeysMaxAge {
		var err error
		if ks, err = v.fetchKeys(ctx, ks, false); err != nil {
			return verifyKey{}, err
		}
	}
	if k, ok := ks.find(jt.header); ok {
		return k, nil
	}
	fresh, err := v.fetchKeys(ctx, ks, true)
	if err != nil {
		return verifyKey{}, err
	}
	if k, ok := fresh.find(jt.header); ok {
		return k, nil
	}
	for _, k := range fresh.keys {
		if k.kid == jt.header.Kid && jt.header.Kid != "" {
			return verifyKey{}, refuse(ErrAlgorithm, "alg "+quoteShort(jt.header.Alg)+" is not allowed by key "+quoteShort(k.kid))
		}
	}
	return verifyKey{}, refuse(ErrUnknownKey, "kid "+quoteShort(jt.header.Kid))
}

// find returns the key matching h's kid that allows its alg (without a
// kid: the one key allowing the alg).
func (ks *keySet) find(h jwsHeader) (verifyKey, bool) {
	var found verifyKey
	n := 0
	for _, k := range ks.keys {
		if (h.Kid == "" || k.kid == h.Kid) && k.allows(h.Alg) {
			if h.Kid != "" {
				return k, true
			}
			found = k
			n++
		}
	}
	return found, n == 1
}

// fetchKeys fetches the key set unless another caller did since seen was
// loaded. unknownKid marks a fetch caused by a token naming a key not in
// seen: rate limited by KeysMinRefetch (within it, seen is returned).
// When the fetch fails while a set is known, the known set stays in use
// (the failure is logged); without one, the error matches ErrUnavailable.
func (v *Validator) fetchKeys(ctx context.Context, seen *keySet, unknownKid bool) (*keySet, error) {
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	cur := v.keys.Load()
	if cur != seen { // fetched by another caller meanwhile
		return cur, nil
	}
	now := v.now()
	if unknownKid && cur != nil && now.Sub(cur.fetched) < v.opts.KeysMinRefetch {
		return cur, nil
	}
	ks, err := v.fetchKeySet(ctx)
	if err != nil {
		v.opts.Logger.Warn().Err(err).Str("issuer", v.opts.Issuer).Msg("fetching the issuer's keys failed")
		if cur != nil {
			// Use the known keys a while longer; try again after
			// KeysMinRefetch.
			kept := &keySet{keys: cur.keys, fetched: now.Add(-v.opts.KeysMaxAge + v.opts.KeysMinRefetch)}
			if kept.fetched.Before(cur.fetched) {
				kept.fetched = cur.fetched
			}
			v.keys.Store(kept)
			return kept, nil
		}
		return nil, refuse(ErrUnavailable, err.Error())
	}
	ks.fetched = now
	v.keys.Store(ks)
	v.opts.Logger.Debug().Str("issuer", v.opts.Issuer).Int("keys", len(ks.keys)).Msg("fetched the issuer's keys")
	return ks, nil
}

// fetchKeySet discovers the JWKS URL (once) and fetches the set. Called
// with fetchMu held.
func (v *Validator) fetchKeySet(ctx context.Context) (*keySet, error) {
	jwksURL := v.opts.JWKSURL
	if jwksURL == "" {
		md, err := v.metadata(ctx)
		if err != nil {
			return nil, err
		}
		if md.JWKSURI == "" {
			return nil, fmt.Errorf("the metadata of %s has no jwks_uri", v.opts.Issuer)
		}
		jwksURL = md.JWKSURI
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	status, err := v.getJSON(ctx, jwksURL, &set)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", jwksURL, status)
	}
	ks := &keySet{}
	for _, k := range set.Keys {
		if vk, ok := parseJWK(k); ok {
			ks.keys = append(ks.keys, vk)
		}
	}
	if len(ks.keys) == 0 {
		return nil, fmt.Errorf("%s holds no usable signature key", jwksURL)
	}
	return ks, nil
}

// metadata returns the issuer's metadata, discovering it at the first
// call that succeeds. Called with fetchMu held.
func (v *Validator) metadata(ctx context.Context) (serverMetadata, error) {
	if v.meta != nil {
		return *v.meta, nil
	}
	md, err := v.discover(ctx)
	if err != nil {
		return serverMetadata{}, err
	}
	v.meta = &md
	return md, nil
}

// claims are a token's claims (a JWT's payload, or an introspection
// answer), decoded with json.Number.
type claims struct {
	raw map[string]any
}

func (c claims) str(name string) string {
	s, _ := c.raw[name].(string)
	return s
}

// strs reads a claim that is a string (space-separated when split) or an
// array of strings.
func (c claims) strs(name string, split bool) []string {
	switch x := c.raw[name].(type) {
	case string:
		if split {
			return strings.Fields(x)
		}
		if x == "" {
			return nil
		}
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// time reads a NumericDate claim (RFC 7519 §2); ok false when absent or
// not a number.
func (c claims) time(name string) (time.Time, bool) {
	n, ok := c.raw[name].(json.Number)
	if !ok {
		return time.Time{}, false
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f > 1e11 {
		return time.Time{}, false
	}
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)), true
}

// checkClaims checks iss, aud, exp, nbf and iat. requireIss is false
// for an introspection answer, which may omit iss (then the endpoint
// stands for the issuer).
func (v *Validator) checkClaims(c claims, requireIss bool) error {
	if iss, ok := c.raw["iss"]; ok || requireIss {
		if s, _ := iss.(string); s != v.opts.Issuer {
			return refuse(ErrIssuer, "iss "+quoteShort(c.str("iss")))
		}
	}
	if !contains(c.strs("aud", false), v.opts.Audience) {
		return refuse(ErrAudience, "aud does not name this resource")
	}
	now, leeway := v.now(), v.opts.Leeway
	exp, ok := c.time("exp")
	if !ok {
		return refuse(ErrExpired, "no exp")
	}
	if !now.Before(exp.Add(leeway)) {
		return refuse(ErrExpired, "")
	}
	if nbf, ok := c.time("nbf"); ok && now.Add(leeway).Before(nbf) {
		return refuse(ErrNotYetValid, "nbf in the future")
	}
	if iat, ok := c.time("iat"); ok && now.Add(leeway).Before(iat) {
		return refuse(ErrNotYetValid, "iat in the future")
	}
	return nil
}

// identity reads the caller from checked claims.
func (v *Validator) identity(c claims) gateway.Identity {
	id := gateway.Identity{
		Issuer:   v.opts.Issuer,
		Subject:  c.str("sub"),
		ClientID: c.str("client_id"),
		Groups:   c.strs(v.opts.GroupsClaim, false),
		Roles:    c.strs(v.opts.RolesClaim, false),
		Scopes:   c.strs("scope", true),
	}
	if id.ClientID == "" {
		id.ClientID = c.str("azp")
	}
	if len(id.Scopes) == 0 {
		id.Scopes = c.strs("scp", true)
	}
	return id
}
