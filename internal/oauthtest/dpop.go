package oauthtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DPoPProof is what a verified DPoP proof (RFC 9449) says.
type DPoPProof struct {
	JTI   string // the proof's id (unique per proof)
	JKT   string // the RFC 7638 SHA-256 thumbprint of the key that signed it
	Nonce string // the server nonce it carries, if any
}

type proofClaims struct {
	JTI   string `json:"jti"`
	HTM   string `json:"htm"`
	HTU   string `json:"htu"`
	IAT   int64  `json:"iat"`
	ATH   string `json:"ath"`
	Nonce string `json:"nonce"`
	jwt.RegisteredClaims
}

// JWKThumbprint is the RFC 7638 SHA-256 thumbprint of a P-256 public JWK.
func JWKThumbprint(x, y string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, `{"crv":"P-256","kty":"EC","x":%q,"y":%q}`, x, y))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// VerifyDPoPProof checks proof for a request of method to target (its
// URL without query and fragment): typ dpop+jwt, ES256, signed by the
// public P-256 key it embeds, a jti, htm and htu as given, an iat within a
// minute of now, and, when accessToken is set, an ath that covers it.
func VerifyDPoPProof(proof, method, target, accessToken string) (DPoPProof, error) {
	var jkt string
	claims := &proofClaims{}
	_, err := jwt.ParseWithClaims(proof, claims, func(t *jwt.Token) (any, error) {
		if t.Header["typ"] != "dpop+jwt" {
			return nil, errors.New("typ is not dpop+jwt")
		}
		jwk, _ := t.Header["jwk"].(map[string]any)
		if jwk == nil || jwk["kty"] != "EC" || jwk["crv"] != "P-256" || jwk["d"] != nil {
			return nil, errors.New("jwk is not a public P-256 key")
		}
		xs, _ := jwk["x"].(string)
		ys, _ := jwk["y"].(string)
		x, err1 := base64.RawURLEncoding.DecodeString(xs)
		y, err2 := base64.RawURLEncoding.DecodeString(ys)
		if err1 != nil || err2 != nil {
			return nil, errors.New("jwk coordinates are not base64url")
		}
		jkt = JWKThumbprint(xs, ys)
		return &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}, nil
	}, jwt.WithValidMethods([]string{"ES256"}))
	if err != nil {
		return DPoPProof{}, err
	}
	switch {
	case claims.JTI == "":
		return DPoPProof{}, errors.New("no jti")
	case claims.HTM != method:
		return DPoPProof{}, fmt.Errorf("htm %q, want %q", claims.HTM, method)
	case claims.HTU != target:
		return DPoPProof{}, fmt.Errorf("htu %q, want %q", claims.HTU, target)
	case time.Since(time.Unix(claims.IAT, 0)).Abs() > time.Minute:
		return DPoPProof{}, errors.New("iat is not now")
	}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		if claims.ATH != base64.RawURLEncoding.EncodeToString(sum[:]) {
			return DPoPProof{}, errors.New("ath does not cover the token")
		}
	}
	return DPoPProof{JTI: claims.JTI, JKT: jkt, Nonce: claims.Nonce}, nil
}
