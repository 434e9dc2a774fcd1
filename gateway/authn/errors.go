package authn

import (
	"errors"

	"github.com/mcpvisor/mcpvisor/gateway"
)

// The reasons a token is refused. Each error a Validator returns for a
// refused token is a *TokenError that matches one of these and
// gateway.ErrInvalidToken with errors.Is; an authorization server that
// cannot be reached gives an error matching ErrUnavailable and
// gateway.ErrAuthUnavailable instead.
var (
	// ErrMalformed: the token is not a JWT this package can read (or,
	// without introspection, not a JWT at all).
	ErrMalformed = errors.New("authn: malformed token")
	// ErrAlgorithm: the token's alg is refused ("none", an HMAC, one the
	// key does not allow, or unknown).
	ErrAlgorithm = errors.New("authn: signature algorithm not accepted")
	// ErrUnknownKey: no key of the issuer's JWKS (even fetched again)
	// verifies the token's kid.
	ErrUnknownKey = errors.New("authn: unknown signing key")
	// ErrSignature: the signature does not verify.
	ErrSignature = errors.New("authn: bad signature")
	// ErrIssuer: iss is not the configured issuer.
	ErrIssuer = errors.New("authn: wrong issuer")
	// ErrAudience: aud does not contain the gateway's resource URI (a
	// token meant for another resource).
	ErrAudience = errors.New("authn: wrong audience")
	// ErrExpired: exp has passed (or is missing).
	ErrExpired = errors.New("authn: token expired")
	// ErrNotYetValid: nbf or iat lies in the future.
	ErrNotYetValid = errors.New("authn: token not yet valid")
	// ErrSenderConstrained: the token is bound to a key (a cnf claim,
	// DPoP or mTLS) and needs its proof, which a bearer request lacks.
	ErrSenderConstrained = errors.New("authn: sender-constrained token presented as a bearer token")
	// ErrInactive: introspection says the token is not active.
	ErrInactive = errors.New("authn: token not active")
	// ErrUnavailable: the issuer's metadata, keys or introspection
	// endpoint could not be fetched; the token may be good.
	ErrUnavailable = errors.New("authn: authorization server unavailable")
)

// TokenError is why a token was refused: Reason is one of the sentinel
// errors above, Detail a short description safe to log and to send in
// error_description (it never contains the token).
type TokenError struct {
	Reason error
	Detail string
}

func (e *TokenError) Error() string {
	if e.Detail == "" {
		return e.Reason.Error()
	}
	return e.Reason.Error() + ": " + e.Detail
}

// Unwrap makes errors.Is match the reason and gateway.ErrInvalidToken
// (gateway.ErrAuthUnavailable for ErrUnavailable).
func (e *TokenError) Unwrap() []error {
	if e.Reason == ErrUnavailable {
		return []error{e.Reason, gateway.ErrAuthUnavailable}
	}
	return []error{e.Reason, gateway.ErrInvalidToken}
}

func refuse(reason error, detail string) error { return &TokenError{Reason: reason, Detail: detail} }
