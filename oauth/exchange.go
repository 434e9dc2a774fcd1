package oauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Token type identifiers (RFC 8693 §3).
const (
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
	TokenTypeIDToken     = "urn:ietf:params:oauth:token-type:id_token"
)

// checkExchangeConfig validates the token exchange settings of cfg (Grant
// GrantTokenExchange).
func checkExchangeConfig(cfg *Config) error {
	switch {
	case cfg.SubjectToken == nil:
		return fmt.Errorf("%w: the token exchange grant needs SubjectToken", ErrInvalidConfig)
	case cfg.ClientID == "" || (cfg.ClientSecret == "" && cfg.PrivateKeyPEM == ""):
		return fmt.Errorf("%w: the token exchange grant needs clientId and clientSecret or a private key", ErrInvalidConfig)
	}
	return nil
}

// exchangeRefusal is the error of a refused exchange: the server's answer
// (its description cleared of the subject token, should the server echo
// it), marked ErrSubjectTokenRejected for invalid_grant and
// unauthorized_client. It does not match ErrNeedsLogin: no login helps,
// only a new subject token.
func exchangeRefusal(oe *Error, subject string) error {
	e := *oe
	e.Err = nil
	e.Description = strings.ReplaceAll(e.Description, subject, redacted)
	switch e.Code {
	case "invalid_grant", "unauthorized_client":
		return fmt.Errorf("%w: %w", ErrSubjectTokenRejected, &e)
	}
	return &e
}

// checkExchanged checks that an exchange's answer is an access token
// (RFC 8693 §2.2.1): the issued_token_type, when the server gave one, is
// an access token or a JWT (a JWT access token), and the token_type is
// not "N_A" (a token that is not an access token).
func checkExchanged(tr *tokenResponse) error {
	switch tr.IssuedTokenType {
	case "", TokenTypeAccessToken, TokenTypeJWT:
	default:
		return &Error{Endpoint: "token", StatusCode: 200, Code: "invalid_response",
			Description: "the exchange issued a " + truncate(tr.IssuedTokenType, 100) + ", not an access token"}
	}
	if strings.EqualFold(tr.TokenType, "N_A") {
		return &Error{Endpoint: "token", StatusCode: 200, Code: "invalid_response",
			Description: "the exchange issued a token that is not an access token (token_type N_A)"}
	}
	return nil
}

// subjectToken asks the config's SubjectToken for the token to exchange.
func (g *grants) subjectToken(ctx context.Context) (string, error) {
	s := g.src
	tok, err := s.cfg.SubjectToken(ctx)
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: %w", ErrNoSubjectToken, err)
	case tok == "":
		return "", fmt.Errorf("%w: SubjectToken returned none", ErrNoSubjectToken)
	}
	return tok, nil
}

// tokenExchange obtains a token for the server by exchanging the subject
// token (RFC 8693 §2.1) at the authorization server's token endpoint,
// authenticated as the pre-registered client. A subject token the server
// refused is not presented again. Called with sem held, after discovery.
func (g *grants) tokenExchange(ctx context.Context, scope string) error {
	s := g.src
	if err := s.gate.check(); err != nil {
		return err
	}
	subject, err := g.subjectToken(ctx)
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(subject))
	s.mu.Lock()
	md, resource := s.as.meta, s.as.resource
	var refused error
	if g.subjectRefusal != nil && g.refusedSubject == sum {
		refused = g.subjectRefusal
	} else {
		s.authzs++
	}
	s.mu.Unlock()
	if refused != nil {
		return refused
	}
	typ := s.cfg.SubjectTokenType
	if typ == "" {
		typ = TokenTypeAccessToken
	}
	form := url.Values{
		"grant_type":           {GrantTokenExchange},
		"subject_token":        {subject},
		"subject_token_type":   {typ},
		"requested_token_type": {TokenTypeAccessToken},
		"resource":             {resource},
	}
	if s.cfg.Audience != "" {
		form.Set("audience", s.cfg.Audience)
	}
	if scope != "" {
		form.Set("scope", scope)
	}
	err = g.exchange(ctx, g.preregistered(md), form, scope)
	if err == nil || isTransient(err) || ctx.Err() != nil || errors.Is(err, ErrBackoff) {
		return err
	}
	var oe *Error
	if !errors.As(err, &oe) {
		return err
	}
	refusal := exchangeRefusal(oe, subject)
	s.mu.Lock()
	g.refusedSubject, g.subjectRefusal = sum, refusal
	s.mu.Unlock()
	s.gate.failed(refusal)
	s.log.Warn().Err(refusal).Msg("the authorization server refused the token exchange; that subject token is not presented again")
	return refusal
}
