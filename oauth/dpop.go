package oauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DPoP (RFC 9449; MCP extension io.modelcontextprotocol/auth/dpop,
// SEP-1932): sender-constrained tokens. The client holds a key pair; it
// signs a proof (a dpop+jwt naming the request's method and URL) for the
// token request, and the authorization server binds the token it issues
// to the key; every request to the resource then carries the token with
// the DPoP scheme and a fresh proof that also covers the token. Servers
// may demand a nonce of their choosing in the proofs (use_dpop_nonce).

// DPoP modes of Config.DPoP.
const (
	// DPoPAuto requests DPoP-bound tokens when the resource asks for them
	// (a DPoP challenge), else Bearer tokens.
	DPoPAuto = ""
	// DPoPAlways requests DPoP-bound tokens from every authorization
	// server that advertises ES256 proofs (dpop_signing_alg_values_supported).
	DPoPAlways = "always"
	// DPoPNever never sends proofs: Bearer tokens only.
	DPoPNever = "never"
)

// dpopAlg is the one proof algorithm mcpvisor signs with.
const dpopAlg = "ES256"

// The DPoP headers and token type.
const (
	headerDPoP      = "DPoP"
	headerDPoPNonce = "DPoP-Nonce"
	tokenTypeDPoP   = "DPoP"
)

// dpopKey is a proof key: an ECDSA P-256 key, its public JWK and its
// encoding for the store (PKCS#8 DER, base64url). A token bound to it is
// kept with it (Token.DPoPKey): without the key the token is useless.
type dpopKey struct {
	priv    *ecdsa.PrivateKey
	jwk     map[string]string
	encoded string
}

func newDPoPKey() (*dpopKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	return keyOf(priv, base64.RawURLEncoding.EncodeToString(der))
}

// parseDPoPKey decodes a key of Token.DPoPKey.
func parseDPoPKey(encoded string) (*dpopKey, error) {
	der, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("oauth: DPoP key: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("oauth: DPoP key: %w", err)
	}
	priv, ok := k.(*ecdsa.PrivateKey)
	if !ok || priv.Curve != elliptic.P256() {
		return nil, fmt.Errorf("oauth: DPoP key: not a P-256 key")
	}
	return keyOf(priv, encoded)
}

func keyOf(priv *ecdsa.PrivateKey, encoded string) (*dpopKey, error) {
	pub, err := priv.PublicKey.Bytes() // uncompressed point: 0x04 || X || Y
	if err != nil {
		return nil, err
	}
	enc := base64.RawURLEncoding.EncodeToString
	return &dpopKey{priv: priv, encoded: encoded, jwk: map[string]string{
		"kty": "EC", "crv": "P-256", "x": enc(pub[1:33]), "y": enc(pub[33:65]),
	}}, nil
}

// dpopClaims are a proof's claims (RFC 9449 §4.2).
type dpopClaims struct {
	JTI   string `json:"jti"`
	HTM   string `json:"htm"`
	HTU   string `json:"htu"`
	IAT   int64  `json:"iat"`
	ATH   string `json:"ath,omitempty"`
	Nonce string `json:"nonce,omitempty"`
}

// GetExpirationTime and the rest implement jwt.Claims (a proof has only
// iat).
func (dpopClaims) GetExpirationTime() (*jwt.NumericDate, error) { return nil, nil }
func (c dpopClaims) GetIssuedAt() (*jwt.NumericDate, error) {
	return jwt.NewNumericDate(time.Unix(c.IAT, 0)), nil
}
func (dpopClaims) GetNotBefore() (*jwt.NumericDate, error) { return nil, nil }
func (dpopClaims) GetIssuer() (string, error)              { return "", nil }
func (dpopClaims) GetSubject() (string, error)             { return "", nil }
func (dpopClaims) GetAudience() (jwt.ClaimStrings, error)  { return nil, nil }

// proof signs a proof for a request of method to target (its query and
// fragment are left out of htu), with a fresh jti. accessToken, when set,
// is covered by ath; nonce, when set, is the server's.
func (k *dpopKey) proof(method, target, accessToken, nonce string, now time.Time) (string, error) {
	htu, err := proofURL(target)
	if err != nil {
		return "", err
	}
	c := dpopClaims{JTI: randomString(16), HTM: method, HTU: htu, IAT: now.Unix(), Nonce: nonce}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		c.ATH = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	t := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	t.Header["typ"] = "dpop+jwt"
	t.Header["jwk"] = k.jwk
	return t.SignedString(k.priv)
}

// proofURL is target without query and fragment (RFC 9449 §4.2, htu).
func proofURL(target string) (string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", fmt.Errorf("oauth: DPoP target: %w", err)
	}
	u.RawQuery, u.Fragment, u.RawFragment, u.ForceQuery = "", "", "", false
	return u.String(), nil
}

// nonceBox holds the latest nonce a server gave (DPoP-Nonce). A nil box
// holds nothing and keeps nothing.
//
// Concurrency: safe for concurrent use.
type nonceBox struct {
	mu    sync.Mutex
	nonce string
}

func (b *nonceBox) get() string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nonce
}

// set records a nonce a response carried (empty: none, kept as it was).
func (b *nonceBox) set(n string) {
	if n = strings.TrimSpace(n); n == "" || b == nil {
		return
	}
	b.mu.Lock()
	b.nonce = n
	b.mu.Unlock()
}
