package oauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// assertionLifetime is how long a client assertion is valid.
const assertionLifetime = 5 * time.Minute

// newAssertionSigner parses a PEM private key (PKCS#8, SEC 1 EC or PKCS#1
// RSA) and returns a signer of RFC 7523 §2.2 client assertions: iss and
// sub the client id, aud the authorization server's issuer, a fresh jti,
// valid for five minutes.
func newAssertionSigner(keyPEM, alg string, now func() time.Time) (assertionSigner, error) {
	block, _ := pem.Decode([]byte(keyPEM))
	if block == nil {
		return nil, errors.New("oauth: private key: no PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("oauth: private key: %w", err)
	}
	var method jwt.SigningMethod
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		switch {
		case alg == "ES256" || alg == "" && k.Curve == elliptic.P256():
			method = jwt.SigningMethodES256
		case alg == "ES384" || alg == "" && k.Curve == elliptic.P384():
			method = jwt.SigningMethodES384
		case alg == "ES512" || alg == "" && k.Curve == elliptic.P521():
			method = jwt.SigningMethodES512
		}
	case *rsa.PrivateKey:
		switch alg {
		case "", "RS256":
			method = jwt.SigningMethodRS256
		case "PS256":
			method = jwt.SigningMethodPS256
		}
	}
	if method == nil {
		return nil, fmt.Errorf("oauth: private key of type %T cannot sign %q", key, alg)
	}
	return func(clientID, audience string) (string, error) {
		t := now()
		claims := jwt.RegisteredClaims{
			Issuer:    clientID,
			Subject:   clientID,
			Audience:  jwt.ClaimStrings{audience},
			IssuedAt:  jwt.NewNumericDate(t),
			ExpiresAt: jwt.NewNumericDate(t.Add(assertionLifetime)),
			ID:        randomString(16),
		}
		return jwt.NewWithClaims(method, claims).SignedString(key)
	}, nil
}
