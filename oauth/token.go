package oauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Token is an access token with what came with it. Its String, GoString
// and MarshalJSON never show the token values: a Token can be logged or
// put in an error without leaking them. Stores persist tokens through
// their own record types.
type Token struct {
	AccessToken  string
	TokenType    string
	RefreshToken string
	// Scope is the granted scope, space-separated, if the server said.
	Scope string
	// Expiry is when the access token expires. When the server gave no
	// expires_in it is the issue time plus the assumed lifetime, and
	// ExpiryAssumed is set.
	Expiry        time.Time
	ExpiryAssumed bool
	// DPoPKey is the proof key the token is bound to (RFC 9449), encoded
	// (PKCS#8, base64url), when the authorization server issued a
	// DPoP-bound token (TokenType "DPoP"); empty for a Bearer token. It
	// is as secret as the tokens, and never shown either.
	DPoPKey string
}

// DPoP reports whether the token is DPoP-bound.
func (t *Token) DPoP() bool { return t != nil && t.DPoPKey != "" }

const redacted = "[redacted]"

// String describes the token without its values.
func (t *Token) String() string {
	if t == nil {
		return "<nil token>"
	}
	return fmt.Sprintf("Token{access:%s refresh:%t dpop:%t scope:%q expiry:%s}", redacted, t.RefreshToken != "", t.DPoP(), t.Scope, t.Expiry.Format(time.RFC3339))
}

// GoString is String, so that %#v does not print the values either.
func (t *Token) GoString() string { return t.String() }

// MarshalJSON renders the token without its values.
func (t *Token) MarshalJSON() ([]byte, error) {
	if t == nil {
		return []byte("null"), nil
	}
	return json.Marshal(struct {
		AccessToken  string    `json:"access_token"`
		RefreshToken bool      `json:"has_refresh_token"`
		DPoP         bool      `json:"dpop,omitempty"`
		Scope        string    `json:"scope,omitempty"`
		Expiry       time.Time `json:"expiry"`
	}{redacted, t.RefreshToken != "", t.DPoP(), t.Scope, t.Expiry})
}

// Valid reports whether the access token exists and has not expired at
// now.
func (t *Token) Valid(now time.Time) bool {
	return t != nil && t.AccessToken != "" && now.Before(t.Expiry)
}

// tokenResponse is the JSON body of a token endpoint answer.
type tokenResponse struct {
	AccessToken      string          `json:"access_token"`
	TokenType        string          `json:"token_type"`
	RefreshToken     string          `json:"refresh_token"`
	ExpiresIn        json.RawMessage `json:"expires_in"`
	Scope            string          `json:"scope"`
	IssuedTokenType  string          `json:"issued_token_type"`
	Error            string          `json:"error"`
	ErrorDescription string          `json:"error_description"`
}

func (r *tokenResponse) expiresIn() (time.Duration, bool) {
	if len(r.ExpiresIn) == 0 || string(r.ExpiresIn) == "null" {
		return 0, false
	}
	var n float64
	if err := json.Unmarshal(r.ExpiresIn, &n); err != nil {
		var s string
		if json.Unmarshal(r.ExpiresIn, &s) != nil {
			return 0, false
		}
		if _, err := fmt.Sscan(s, &n); err != nil {
			return 0, false
		}
	}
	if n <= 0 {
		return 0, false
	}
	return time.Duration(n * float64(time.Second)), true
}

// Client authentication methods at the token endpoint (RFC 7591 §2,
// RFC 7523).
const (
	AuthMethodBasic      = "client_secret_basic"
	AuthMethodPost       = "client_secret_post"
	AuthMethodNone       = "none"
	AuthMethodPrivateKey = "private_key_jwt"
)

// Grant types.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantRefreshToken      = "refresh_token"
	GrantClientCredentials = "client_credentials"
	GrantJWTBearer         = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	GrantTokenExchange     = "urn:ietf:params:oauth:grant-type:token-exchange"
)

// ClientInfo is the client identity used with one authorization server.
// Its String and MarshalJSON do not show the secret.
type ClientInfo struct {
	ClientID     string
	ClientSecret string
	// AuthMethod is the token endpoint authentication method:
	// client_secret_basic, client_secret_post, none or private_key_jwt.
	AuthMethod string
	// Source says how the identity was obtained: "preregistered", "cimd"
	// or "dynamic".
	Source string
	// RedirectURIs are the redirect URIs registered (dynamic registration).
	RedirectURIs []string
	// SecretExpiresAt is when a dynamically registered secret expires
	// (zero: never).
	SecretExpiresAt time.Time
}

// String describes the client without its secret.
func (c *ClientInfo) String() string {
	if c == nil {
		return "<nil client>"
	}
	return fmt.Sprintf("Client{id:%q auth:%s source:%s secret:%t}", c.ClientID, c.AuthMethod, c.Source, c.ClientSecret != "")
}

// GoString is String.
func (c *ClientInfo) GoString() string { return c.String() }

// MarshalJSON renders the client without its secret.
func (c *ClientInfo) MarshalJSON() ([]byte, error) {
	if c == nil {
		return []byte("null"), nil
	}
	return json.Marshal(struct {
		ClientID   string `json:"client_id"`
		AuthMethod string `json:"auth_method"`
		Source     string `json:"source"`
		HasSecret  bool   `json:"has_secret"`
	}{c.ClientID, c.AuthMethod, c.Source, c.ClientSecret != ""})
}

// assertionSigner signs a client assertion for private_key_jwt; set by
// the source from the config's key.
type assertionSigner func(clientID, audience string) (string, error)

// tokenCall is one request to a token endpoint.
type tokenCall struct {
	client   *http.Client
	endpoint string
	info     *ClientInfo
	sign     assertionSigner // for private_key_jwt
	audience string          // the AS issuer, for assertions
	form     url.Values
	now      time.Time
	lifetime time.Duration // assumed lifetime when expires_in is missing
	name     string        // endpoint name for errors ("token")
	// dpop, when set, signs a DPoP proof for the request, with the
	// server's latest nonce (kept in nonce); the token issued is bound
	// to it.
	dpop  *dpopKey
	nonce *nonceBox
}

// do sends the request and parses the answer. With a DPoP key, a
// use_dpop_nonce refusal is answered once, with the nonce the server
// gave (RFC 9449 §8). Errors: *Error wrapping ErrNeedsLogin
// (invalid_grant), ErrTransient (network, 5xx, 429), or nothing (another
// OAuth error).
func (c *tokenCall) do(ctx context.Context) (*Token, *tokenResponse, error) {
	name := c.name
	if name == "" {
		name = "token"
	}
	if err := checkEndpoint(c.endpoint); err != nil {
		return nil, nil, err
	}
	for attempt := 0; ; attempt++ {
		resp, body, rerr, err := c.send(ctx, name)
		if err != nil {
			return nil, nil, err
		}
		var tr tokenResponse
		jerr := json.Unmarshal(body, &tr)
		if c.dpop != nil {
			c.nonce.set(resp.Header.Get(headerDPoPNonce))
			if tr.Error == "use_dpop_nonce" && resp.Header.Get(headerDPoPNonce) != "" && attempt == 0 {
				continue // again, with the server's nonce in the proof
			}
		}
		switch {
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			return nil, nil, &Error{Endpoint: name, StatusCode: resp.StatusCode, Code: tr.Error, Err: ErrTransient}
		case rerr != nil:
			return nil, nil, &Error{Endpoint: name, StatusCode: resp.StatusCode, Err: fmt.Errorf("%w: %w", ErrTransient, rerr)}
		case tr.Error != "" || resp.StatusCode >= 300:
			// An OAuth error, possibly with HTTP 200.
			e := &Error{Endpoint: name, StatusCode: resp.StatusCode, Code: tr.Error, Description: tr.ErrorDescription}
			if tr.Error == "invalid_grant" {
				e.Err = ErrNeedsLogin
			}
			return nil, nil, e
		case jerr != nil || tr.AccessToken == "":
			return nil, nil, &Error{Endpoint: name, StatusCode: resp.StatusCode, Code: "invalid_response", Description: "no access_token in the answer"}
		}
		t := &Token{AccessToken: tr.AccessToken, TokenType: tr.TokenType, RefreshToken: tr.RefreshToken, Scope: tr.Scope}
		if c.dpop != nil && strings.EqualFold(tr.TokenType, tokenTypeDPoP) {
			// Bound to the key: keep them together. (A server that
			// ignored the proof issued a Bearer token.)
			t.TokenType, t.DPoPKey = tokenTypeDPoP, c.dpop.encoded
		}
		if d, ok := tr.expiresIn(); ok {
			t.Expiry = c.now.Add(d)
		} else {
			t.Expiry, t.ExpiryAssumed = c.now.Add(c.lifetime), true
		}
		return t, &tr, nil
	}
}

// send posts the form once (a fresh client assertion and DPoP proof each
// time) and reads the body. err is a failure to send; rerr one to read.
func (c *tokenCall) send(ctx context.Context, name string) (resp *http.Response, body []byte, rerr, err error) {
	form := url.Values{}
	for k, v := range c.form {
		form[k] = v
	}
	header := http.Header{}
	if c.info != nil {
		switch c.info.AuthMethod {
		case AuthMethodBasic:
			cred := url.QueryEscape(c.info.ClientID) + ":" + url.QueryEscape(c.info.ClientSecret)
			header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred)))
		case AuthMethodPost:
			form.Set("client_id", c.info.ClientID)
			form.Set("client_secret", c.info.ClientSecret)
		case AuthMethodPrivateKey:
			if c.sign == nil {
				return nil, nil, nil, fmt.Errorf("oauth: private_key_jwt needs a private key")
			}
			assertion, err := c.sign(c.info.ClientID, c.audience)
			if err != nil {
				return nil, nil, nil, err
			}
			form.Set("client_id", c.info.ClientID)
			form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
			form.Set("client_assertion", assertion)
		default: // none
			if c.info.ClientID != "" {
				form.Set("client_id", c.info.ClientID)
			}
		}
	}
	if c.dpop != nil {
		proof, err := c.dpop.proof(http.MethodPost, c.endpoint, "", c.nonce.get(), c.now)
		if err != nil {
			return nil, nil, nil, err
		}
		header.Set(headerDPoP, proof)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, nil, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err = c.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, nil, ctx.Err()
		}
		return nil, nil, nil, &Error{Endpoint: name, Err: fmt.Errorf("%w: %w", ErrTransient, stripURLError(err))}
	}
	defer resp.Body.Close()
	body, rerr = io.ReadAll(io.LimitReader(resp.Body, maxMetadata))
	return resp, body, rerr, nil
}

// stripURLError drops the URL from a *url.Error: the URL of a request
// may carry a code or state in its query.
func stripURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// chooseAuthMethod picks the token endpoint auth method for a client with
// (or without) a secret, from what the server supports (RFC 8414: absent
// means client_secret_basic).
func chooseAuthMethod(hasSecret bool, supported []string) string {
	if !hasSecret {
		return AuthMethodNone
	}
	if len(supported) == 0 || contains(supported, AuthMethodBasic) {
		return AuthMethodBasic
	}
	if contains(supported, AuthMethodPost) {
		return AuthMethodPost
	}
	return AuthMethodBasic
}
