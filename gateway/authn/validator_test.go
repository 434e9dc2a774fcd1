package authn_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/authn"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

const resource = "http://127.0.0.1:9/mcp" // the protected resource the tokens are for

func newValidator(t *testing.T, opts authn.Options) *authn.Validator {
	t.Helper()
	v, err := authn.New(opts)
	require.NoError(t, err)
	return v
}

// JWT access tokens of a real authorization server, signed with each
// algorithm it offers, are validated against its discovered key set, and
// the caller's identity read from their claims; the checks on iss, aud,
// exp, iat and the signature each refuse with their typed error.
func TestValidatorJWTFromProvider(t *testing.T) {
	issuer, _ := provider(t, resource, 0)
	ctx := testwait.Context(t)
	var clk clock
	// No cache of verified tokens: every check runs at every call.
	v := newValidator(t, authn.Options{Issuer: issuer, Audience: resource, Now: clk.now, VerifiedCache: -1})
	for _, alg := range []string{"RS256", "PS256", "ES256", "EdDSA"} {
		t.Run(alg, func(t *testing.T) {
			configure(t, issuer, url.Values{"alg": {alg}})
			tok := clientToken(t, issuer, "cc-user", resource, baseScope)
			header, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
			require.Contains(t, string(header), `"alg":"`+alg+`"`)
			id, err := v.ValidateToken(ctx, tok)
			require.NoError(t, err)
			assert.Equal(t, gateway.Identity{Issuer: issuer, Subject: "cc-user", ClientID: "cc-user",
				Groups: []string{"team-cc-user"}, Roles: []string{"role-cc-user"}, Scopes: []string{baseScope}}, id)
		})
	}
	configure(t, issuer, url.Values{"alg": {"RS256"}})
	tok := clientToken(t, issuer, "cc-admin", resource, baseScope+" "+adminScope)
	id, err := v.ValidateToken(ctx, tok)
	require.NoError(t, err)
	assert.Equal(t, []string{baseScope, adminScope}, id.Scopes)

	refused := func(t *testing.T, v *authn.Validator, tok string, reason error) {
		t.Helper()
		_, err := v.ValidateToken(ctx, tok)
		require.Error(t, err)
		assert.ErrorIs(t, err, reason)
		assert.ErrorIs(t, err, gateway.ErrInvalidToken)
		var te *authn.TokenError
		assert.True(t, errors.As(err, &te))
		assert.NotContains(t, err.Error(), tok, "the token is never in an error")
	}
	t.Run("audience", func(t *testing.T) {
		other := newValidator(t, authn.Options{Issuer: issuer, Audience: "http://127.0.0.1:10/mcp"})
		refused(t, other, tok, authn.ErrAudience)
	})
	t.Run("issuer", func(t *testing.T) {
		// The metadata of a path-less issuer is found with or without
		// the slash, but iss is compared exactly.
		slash := newValidator(t, authn.Options{Issuer: issuer + "/", Audience: resource})
		refused(t, slash, tok, authn.ErrIssuer)
	})
	t.Run("expired", func(t *testing.T) {
		clk.advance(61*time.Second + authn.DefaultLeeway)
		defer clk.advance(-61*time.Second - authn.DefaultLeeway)
		refused(t, v, tok, authn.ErrExpired)
	})
	t.Run("leeway", func(t *testing.T) {
		clk.advance(60*time.Second + authn.DefaultLeeway/2)
		defer clk.advance(-60*time.Second - authn.DefaultLeeway/2)
		_, err := v.ValidateToken(ctx, tok)
		assert.NoError(t, err, "within the leeway after exp")
	})
	t.Run("not yet valid", func(t *testing.T) {
		clk.advance(-time.Minute)
		defer clk.advance(time.Minute)
		refused(t, v, tok, authn.ErrNotYetValid)
	})
	t.Run("signature", func(t *testing.T) {
		parts := strings.Split(tok, ".")
		claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
		forged := strings.Replace(string(claims), `"sub":"cc-admin"`, `"sub":"root"`, 1)
		require.NotEqual(t, string(claims), forged)
		refused(t, v, parts[0]+"."+base64.RawURLEncoding.EncodeToString([]byte(forged))+"."+parts[2], authn.ErrSignature)
	})
	t.Run("alg none", func(t *testing.T) {
		parts := strings.Split(tok, ".")
		none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"at+jwt"}`))
		refused(t, v, none+"."+parts[1]+".", authn.ErrAlgorithm)
	})
	t.Run("HMAC with the public key", func(t *testing.T) {
		// The classic confusion: HS256 keyed with the RSA public key's
		// bytes, which anybody can fetch.
		parts := strings.Split(tok, ".")
		hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"at+jwt"}`))
		mac := hmac.New(sha256.New, []byte("the public key"))
		mac.Write([]byte(hdr + "." + parts[1]))
		refused(t, v, hdr+"."+parts[1]+"."+base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), authn.ErrAlgorithm)
	})
	t.Run("verified cache", func(t *testing.T) {
		// A remembered token still expires, and a changed one is not
		// taken for it.
		cached := newValidator(t, authn.Options{Issuer: issuer, Audience: resource, Now: clk.now})
		for range 2 {
			id, err := cached.ValidateToken(ctx, tok)
			require.NoError(t, err)
			assert.Equal(t, "cc-admin", id.Subject)
		}
		parts := strings.Split(tok, ".")
		refused(t, cached, parts[0]+"."+parts[1]+"."+parts[2][:len(parts[2])-2]+"AA", authn.ErrSignature)
		clk.advance(61*time.Second + authn.DefaultLeeway)
		defer clk.advance(-61*time.Second - authn.DefaultLeeway)
		refused(t, cached, tok, authn.ErrExpired)
	})
	t.Run("malformed", func(t *testing.T) {
		refused(t, v, "a.b.c", authn.ErrMalformed)
		refused(t, v, "opaque-without-introspection", authn.ErrMalformed)
	})
}

// A restart of the authorization server with new keys (key rotation):
// a token signed by the new key names a kid the cached set lacks, and
// the set is fetched again, once per KeysMinRefetch at most; a token of
// the retired key is refused; tokens of a known key need no fetch.
func TestValidatorKeyRotation(t *testing.T) {
	port := freePort(t)
	issuer, stop := provider(t, resource, port)
	ctx := testwait.Context(t)
	var clk clock
	var tr counting
	v := newValidator(t, authn.Options{Issuer: issuer, Audience: resource, Now: clk.now,
		HTTPClient: &http.Client{Transport: &tr}, KeysMinRefetch: time.Minute})
	old := clientToken(t, issuer, "cc-user", resource, baseScope)
	_, err := v.ValidateToken(ctx, old)
	require.NoError(t, err)
	require.Equal(t, 1, tr.count("/jwks"))

	stop()
	issuer2, _ := provider(t, resource, port)
	require.Equal(t, issuer, issuer2)
	rotated := clientToken(t, issuer, "cc-user", resource, baseScope)

	// Within KeysMinRefetch of the last fetch, an unknown kid does not
	// fetch again.
	_, err = v.ValidateToken(ctx, rotated)
	assert.ErrorIs(t, err, authn.ErrUnknownKey)
	assert.Equal(t, 1, tr.count("/jwks"))

	clk.advance(time.Minute)
	_, err = v.ValidateToken(ctx, rotated)
	require.NoError(t, err, "the new key was fetched")
	assert.Equal(t, 2, tr.count("/jwks"))
	_, err = v.ValidateToken(ctx, old)
	assert.ErrorIs(t, err, authn.ErrUnknownKey, "the retired key is gone")
	assert.Equal(t, 2, tr.count("/jwks"), "rate limited")

	for range 3 {
		_, err = v.ValidateToken(ctx, rotated)
		require.NoError(t, err)
	}
	assert.Equal(t, 2, tr.count("/jwks"), "a known key needs no fetch")
}

// Opaque tokens are introspected (RFC 7662) with the gateway's client
// credentials; an active answer is cached (one request for many
// validations), an unknown token is inactive, and an answer for another
// audience is refused.
func TestValidatorIntrospection(t *testing.T) {
	issuer, _ := provider(t, resource, 0)
	ctx := testwait.Context(t)
	configure(t, issuer, url.Values{"format": {"opaque"}})
	tok := clientToken(t, issuer, "cc-admin", resource, baseScope+" "+adminScope)
	require.False(t, strings.Count(tok, ".") == 2, "an opaque token")

	var tr counting
	v := newValidator(t, authn.Options{Issuer: issuer, Audience: resource, ClientID: "mcpvisor-gateway",
		ClientSecret: "mcpvisor-gateway-secret", HTTPClient: &http.Client{Transport: &tr}})
	for range 3 {
		id, err := v.ValidateToken(ctx, tok)
		require.NoError(t, err)
		assert.Equal(t, gateway.Identity{Issuer: issuer, ClientID: "cc-admin", Groups: []string{"team-cc-admin"},
			Roles: []string{"role-cc-admin"}, Scopes: []string{baseScope, adminScope}}, id)
	}
	assert.Equal(t, 1, tr.count("/token/introspection"), "the active answer was cached")

	_, err := v.ValidateToken(ctx, "not-a-token-the-provider-issued")
	assert.ErrorIs(t, err, authn.ErrInactive)

	other := newValidator(t, authn.Options{Issuer: issuer, Audience: "http://127.0.0.1:10/mcp",
		ClientID: "mcpvisor-gateway", ClientSecret: "mcpvisor-gateway-secret"})
	_, err = other.ValidateToken(ctx, tok)
	assert.ErrorIs(t, err, authn.ErrAudience)

	wrong := newValidator(t, authn.Options{Issuer: issuer, Audience: resource, ClientID: "mcpvisor-gateway", ClientSecret: "wrong"})
	_, err = wrong.ValidateToken(ctx, tok)
	assert.ErrorIs(t, err, gateway.ErrAuthUnavailable, "the introspection endpoint refused the gateway's credentials")
}

// An issuer nobody answers for: no key can be fetched, and the error says
// validation is unavailable (not that the token is bad).
func TestValidatorUnavailable(t *testing.T) {
	v := newValidator(t, authn.Options{Issuer: "http://127.0.0.1:" + itoa(freePort(t)), Audience: resource})
	_, err := v.ValidateToken(context.Background(), "eyJhbGciOiJSUzI1NiJ9.e30.c2ln")
	assert.ErrorIs(t, err, authn.ErrUnavailable)
	assert.ErrorIs(t, err, gateway.ErrAuthUnavailable)
	assert.NotErrorIs(t, err, gateway.ErrInvalidToken)

	_, err = authn.New(authn.Options{Issuer: "ftp://x", Audience: resource})
	assert.ErrorIs(t, err, authn.ErrConfig)
	_, err = authn.New(authn.Options{Issuer: "https://x"})
	assert.ErrorIs(t, err, authn.ErrConfig)
}

// A DPoP-bound access token (node-oidc-provider binds it to the key of
// the client's proof: cnf.jkt) is refused when presented as a bearer
// token (RFC 9449 §7.2), as a JWT and by introspection.
func TestValidatorRefusesSenderConstrainedTokens(t *testing.T) {
	issuer, _ := provider(t, resource, 0)
	ctx := testwait.Context(t)
	v := newValidator(t, authn.Options{Issuer: issuer, Audience: resource, ClientID: "mcpvisor-gateway",
		ClientSecret: "mcpvisor-gateway-secret"})
	for _, format := range []string{"jwt", "opaque"} {
		configure(t, issuer, url.Values{"format": {format}})
		tok := dpopToken(t, issuer, "cc-user", resource, baseScope)
		_, err := v.ValidateToken(ctx, tok)
		assert.ErrorIs(t, err, authn.ErrSenderConstrained, format)
		assert.ErrorIs(t, err, gateway.ErrInvalidToken, format)
	}
}

// dpopToken is clientToken with a DPoP proof (RFC 9449 §4) by a fresh
// P-256 key: the token issued is bound to that key.
func dpopToken(t *testing.T, issuer, client, resource, scope string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	b64 := base64.RawURLEncoding.EncodeToString
	header, _ := json.Marshal(map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": map[string]string{
		"kty": "EC", "crv": "P-256", "x": b64(key.X.FillBytes(make([]byte, 32))), "y": b64(key.Y.FillBytes(make([]byte, 32)))}})
	jti := make([]byte, 16)
	_, _ = rand.Read(jti)
	claims, _ := json.Marshal(map[string]any{"jti": b64(jti), "htm": "POST", "htu": issuer + "/token", "iat": time.Now().Unix()})
	input := b64(header) + "." + b64(claims)
	sum := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	require.NoError(t, err)
	proof := input + "." + b64(append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...))

	req, err := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(url.Values{
		"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {scope}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("DPoP", proof)
	req.SetBasicAuth(client, client+"-secret")
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		Error       string `json:"error_description"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&tok))
	require.Equal(t, http.StatusOK, resp.StatusCode, tok.Error)
	require.Equal(t, "DPoP", tok.TokenType)
	return tok.AccessToken
}
