package oauthtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
)

// Issuer is a minimal token issuer for benchmarks and fuzzing where
// node-oidc-provider cannot run: it publishes OpenID metadata and a JWK
// set (an RSA, a P-256 and an Ed25519 key) and signs the JWT access
// tokens the caller asks for. Tests of behaviour use the real provider
// (StartOIDCProvider).
type Issuer struct {
	*httptest.Server
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
	ed  ed25519.PrivateKey
}

// NewIssuer starts an Issuer; Close ends it.
func NewIssuer() *Issuer {
	is := &Issuer{}
	is.rsa, _ = rsa.GenerateKey(rand.Reader, 2048)
	is.ec, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, is.ed, _ = ed25519.GenerateKey(rand.Reader)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": is.URL, "jwks_uri": is.URL + "/jwks"})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		b64 := base64.RawURLEncoding.EncodeToString
		pad := func(n *big.Int, size int) string { return b64(n.FillBytes(make([]byte, size))) }
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]any{
			{"kty": "RSA", "kid": "rsa", "use": "sig", "n": b64(is.rsa.N.Bytes()), "e": b64(big.NewInt(int64(is.rsa.E)).Bytes())},
			{"kty": "EC", "kid": "ec", "crv": "P-256", "x": pad(is.ec.X, 32), "y": pad(is.ec.Y, 32)},
			{"kty": "OKP", "kid": "ed", "crv": "Ed25519", "x": b64(is.ed.Public().(ed25519.PublicKey))},
		}})
	})
	is.Server = httptest.NewServer(mux)
	return is
}

// Token signs claims with alg (RS256, PS256, ES256 or EdDSA) by the
// matching key.
func (is *Issuer) Token(alg string, claims map[string]any) string {
	kid := map[string]string{"RS256": "rsa", "PS256": "rsa", "ES256": "ec", "EdDSA": "ed"}[alg]
	h, _ := json.Marshal(map[string]string{"alg": alg, "typ": "at+jwt", "kid": kid})
	p, _ := json.Marshal(claims)
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p)
	sum := sha256.Sum256([]byte(input))
	var sig []byte
	switch alg {
	case "RS256":
		sig, _ = rsa.SignPKCS1v15(rand.Reader, is.rsa, crypto.SHA256, sum[:])
	case "PS256":
		sig, _ = rsa.SignPSS(rand.Reader, is.rsa, crypto.SHA256, sum[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	case "ES256":
		r, s, _ := ecdsa.Sign(rand.Reader, is.ec, sum[:])
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	case "EdDSA":
		sig = ed25519.Sign(is.ed, []byte(input))
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}
