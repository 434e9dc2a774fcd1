package authn

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"strings"
)

// MaxTokenSize bounds the tokens read (bytes); a longer one is malformed.
const MaxTokenSize = 16 << 10

// jwsHeader is the protected header of a compact JWS (RFC 7515 §4).
type jwsHeader struct {
	Alg  string   `json:"alg"`
	Kid  string   `json:"kid"`
	Typ  string   `json:"typ"`
	Crit []string `json:"crit"`
}

// compactJWT is a JWT split and decoded, not yet verified.
type compactJWT struct {
	header       jwsHeader
	payload      []byte // the claims, JSON
	signingInput []byte // header.payload as sent
	signature    []byte
}

// looksLikeJWT reports whether token has the compact JWS shape (three
// dot-separated parts); an opaque token does not.
func looksLikeJWT(token string) bool { return strings.Count(token, ".") == 2 }

// parseJWT splits and decodes a compact JWS (RFC 7515 §7.1) without
// verifying it. Every failure is ErrMalformed, or ErrAlgorithm for a
// header this package will not verify.
func parseJWT(token string) (*compactJWT, error) {
	if len(token) > MaxTokenSize {
		return nil, refuse(ErrMalformed, "token too long")
	}
	h, rest, ok := strings.Cut(token, ".")
	if !ok {
		return nil, refuse(ErrMalformed, "not a JWS")
	}
	p, s, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(s, ".") {
		return nil, refuse(ErrMalformed, "not a compact JWS")
	}
	hb, err := base64.RawURLEncoding.Strict().DecodeString(h)
	if err != nil {
		return nil, refuse(ErrMalformed, "header is not base64url")
	}
	var jt compactJWT
	if err := strictJSON(hb, &jt.header); err != nil {
		return nil, refuse(ErrMalformed, "header is not a JSON object")
	}
	if len(jt.header.Crit) > 0 {
		return nil, refuse(ErrMalformed, "unsupported critical header")
	}
	switch strings.ToLower(jt.header.Typ) {
	case "", "jwt", "at+jwt", "application/at+jwt":
	default:
		return nil, refuse(ErrMalformed, "typ "+quoteShort(jt.header.Typ)+" is not an access token")
	}
	if _, ok := algorithms[jt.header.Alg]; !ok {
		return nil, refuse(ErrAlgorithm, "alg "+quoteShort(jt.header.Alg))
	}
	if jt.payload, err = base64.RawURLEncoding.Strict().DecodeString(p); err != nil {
		return nil, refuse(ErrMalformed, "payload is not base64url")
	}
	if jt.signature, err = base64.RawURLEncoding.Strict().DecodeString(s); err != nil {
		return nil, refuse(ErrMalformed, "signature is not base64url")
	}
	jt.signingInput = []byte(token[:len(h)+1+len(p)])
	return &jt, nil
}

// strictJSON decodes one JSON object into v, refusing trailing data.
func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errTrailing
	}
	return nil
}

var errTrailing = refuse(ErrMalformed, "trailing data")

// quoteShort quotes s for an error message, cut to 32 bytes.
func quoteShort(s string) string {
	if len(s) > 32 {
		s = s[:32] + "…"
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}

// algorithm is one JWS signature algorithm this package verifies, with
// the key type it needs.
type algorithm struct {
	kty    string // RSA, EC or OKP
	crv    string // for EC and OKP
	hash   crypto.Hash
	verify func(key crypto.PublicKey, hash crypto.Hash, input, sig []byte) bool
}

// algorithms are the accepted algorithms (RFC 7518 §3, RFC 8037). No
// "none", no HMAC: with a public key set, an HMAC would let anybody who
// has the public key sign.
var algorithms = map[string]algorithm{
	"RS256": {kty: "RSA", hash: crypto.SHA256, verify: verifyPKCS1},
	"RS384": {kty: "RSA", hash: crypto.SHA384, verify: verifyPKCS1},
	"RS512": {kty: "RSA", hash: crypto.SHA512, verify: verifyPKCS1},
	"PS256": {kty: "RSA", hash: crypto.SHA256, verify: verifyPSS},
	"PS384": {kty: "RSA", hash: crypto.SHA384, verify: verifyPSS},
	"PS512": {kty: "RSA", hash: crypto.SHA512, verify: verifyPSS},
	"ES256": {kty: "EC", crv: "P-256", hash: crypto.SHA256, verify: verifyECDSA},
	"ES384": {kty: "EC", crv: "P-384", hash: crypto.SHA384, verify: verifyECDSA},
	"EdDSA": {kty: "OKP", crv: "Ed25519", verify: verifyEd25519},
	// "Ed25519" is the fully specified name of EdDSA over Ed25519
	// (RFC 9864).
	"Ed25519": {kty: "OKP", crv: "Ed25519", verify: verifyEd25519},
}

func digest(h crypto.Hash, input []byte) []byte {
	w := h.New()
	w.Write(input)
	return w.Sum(nil)
}

func verifyPKCS1(key crypto.PublicKey, h crypto.Hash, input, sig []byte) bool {
	pub, ok := key.(*rsa.PublicKey)
	return ok && rsa.VerifyPKCS1v15(pub, h, digest(h, input), sig) == nil
}

func verifyPSS(key crypto.PublicKey, h crypto.Hash, input, sig []byte) bool {
	pub, ok := key.(*rsa.PublicKey)
	return ok && rsa.VerifyPSS(pub, h, digest(h, input), sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) == nil
}

// verifyECDSA checks a JWS ECDSA signature: R and S, each the curve's
// size, concatenated (RFC 7518 §3.4), not ASN.1.
func verifyECDSA(key crypto.PublicKey, h crypto.Hash, input, sig []byte) bool {
	pub, ok := key.(*ecdsa.PublicKey)
	if !ok {
		return false
	}
	n := (pub.Curve.Params().BitSize + 7) / 8
	if len(sig) != 2*n {
		return false
	}
	r, s := new(big.Int).SetBytes(sig[:n]), new(big.Int).SetBytes(sig[n:])
	return ecdsa.Verify(pub, digest(h, input), r, s)
}

func verifyEd25519(key crypto.PublicKey, _ crypto.Hash, input, sig []byte) bool {
	pub, ok := key.(ed25519.PublicKey)
	return ok && len(sig) == ed25519.SignatureSize && ed25519.Verify(pub, input, sig)
}

// jwk is one key of a JWK Set as published (RFC 7517 §4).
type jwk struct {
	Kty    string   `json:"kty"`
	Kid    string   `json:"kid"`
	Use    string   `json:"use"`
	KeyOps []string `json:"key_ops"`
	Alg    string   `json:"alg"`
	Crv    string   `json:"crv"`
	N      string   `json:"n"`
	E      string   `json:"e"`
	X      string   `json:"x"`
	Y      string   `json:"y"`
	D      string   `json:"d"` // a private key: refused
}

// verifyKey is a usable signature key of the issuer's set.
type verifyKey struct {
	kid string
	kty string
	crv string
	alg string // the JWK's alg; "" allows every algorithm of its type
	pub crypto.PublicKey
}

// minRSABits is the smallest RSA modulus accepted (RFC 7518 §3.3).
const minRSABits = 2048

// parseJWK returns the verification key k describes, or ok false for a
// key this package cannot or must not use for signatures (encryption
// keys, symmetric keys, private parts, unknown types, weak RSA).
func parseJWK(k jwk) (verifyKey, bool) {
	if k.Use != "" && k.Use != "sig" {
		return verifyKey{}, false
	}
	if len(k.KeyOps) > 0 && !contains(k.KeyOps, "verify") {
		return verifyKey{}, false
	}
	if k.D != "" {
		return verifyKey{}, false
	}
	if k.Alg != "" {
		a, ok := algorithms[k.Alg]
		if !ok || a.kty != k.Kty {
			return verifyKey{}, false
		}
	}
	vk := verifyKey{kid: k.Kid, kty: k.Kty, crv: k.Crv, alg: k.Alg}
	b64 := base64.RawURLEncoding
	switch k.Kty {
	case "RSA":
		n, err1 := b64.DecodeString(k.N)
		e, err2 := b64.DecodeString(k.E)
		if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
			return verifyKey{}, false
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pub.N.BitLen() < minRSABits || pub.E < 3 || pub.E%2 == 0 {
			return verifyKey{}, false
		}
		vk.pub = pub
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		default:
			return verifyKey{}, false
		}
		x, err1 := b64.DecodeString(k.X)
		y, err2 := b64.DecodeString(k.Y)
		size := (curve.Params().BitSize + 7) / 8
		if err1 != nil || err2 != nil || len(x) != size || len(y) != size {
			return verifyKey{}, false
		}
		// The uncompressed point form, which ParseUncompressedPublicKey
		// checks lies on the curve.
		point := append(append([]byte{4}, x...), y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return verifyKey{}, false
		}
		vk.pub = pub
	case "OKP":
		x, err := b64.DecodeString(k.X)
		if k.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
			return verifyKey{}, false
		}
		vk.pub = ed25519.PublicKey(x)
	default:
		return verifyKey{}, false
	}
	return vk, true
}

// allows reports whether the key may verify a signature by alg: the
// algorithm is of the key's type and curve, and the key's own alg, if it
// names one, is alg.
func (k verifyKey) allows(alg string) bool {
	a, ok := algorithms[alg]
	if !ok || a.kty != k.kty || (a.crv != "" && a.crv != k.crv) {
		return false
	}
	if k.alg == "" {
		return true
	}
	return k.alg == alg || (k.alg == "EdDSA" && alg == "Ed25519") || (k.alg == "Ed25519" && alg == "EdDSA")
}

// verify checks jt's signature with k.
func (k verifyKey) verify(jt *compactJWT) bool {
	a := algorithms[jt.header.Alg]
	return a.verify(k.pub, a.hash, jt.signingInput, jt.signature)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
