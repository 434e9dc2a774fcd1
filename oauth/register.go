package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// registrationRequest is the client metadata sent for dynamic client
// registration (RFC 7591 §2).
type registrationRequest struct {
	ClientName              string   `json:"client_name"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	ApplicationType         string   `json:"application_type"`
}

type registrationResponse struct {
	ClientID                string   `json:"client_id"`
	ClientSecret            string   `json:"client_secret"`
	ClientSecretExpiresAt   int64    `json:"client_secret_expires_at"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	RedirectURIs            []string `json:"redirect_uris"`
	Error                   string   `json:"error"`
	ErrorDescription        string   `json:"error_description"`
}

// register performs dynamic client registration (RFC 7591) as a native
// application with the authorization_code and refresh_token grants.
func register(ctx context.Context, client *http.Client, md *ServerMetadata, name, redirectURI string) (*ClientInfo, error) {
	if err := checkEndpoint(md.RegistrationEndpoint); err != nil {
		return nil, err
	}
	method := AuthMethodNone
	if s := md.TokenEndpointAuthMethodsSupported; len(s) > 0 && !contains(s, AuthMethodNone) {
		method = chooseAuthMethod(true, s)
	}
	reqBody := registrationRequest{
		ClientName:              name,
		RedirectURIs:            []string{redirectURI},
		GrantTypes:              []string{GrantAuthorizationCode, GrantRefreshToken},
		ResponseTypes:           []string{"code"},
		TokenEndpointAuthMethod: method,
		ApplicationType:         "native",
		// No scope: it would restrict the client to what it asks for now
		// (a step-up must not need a new registration), and servers
		// reject resource scopes they do not know as client metadata
		// (node-oidc-provider: invalid_client_metadata).
	}
	b, err := json.Marshal(reqBody)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, md.RegistrationEndpoint, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{Endpoint: "registration", Err: fmt.Errorf("%w: %w", ErrTransient, stripURLError(err))}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxMetadata))
	var rr registrationResponse
	_ = json.Unmarshal(body, &rr)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return nil, &Error{Endpoint: "registration", StatusCode: resp.StatusCode, Code: rr.Error, Err: ErrTransient}
	case resp.StatusCode >= 300 || rr.Error != "":
		return nil, &Error{Endpoint: "registration", StatusCode: resp.StatusCode, Code: rr.Error, Description: rr.ErrorDescription, Err: ErrNoClient}
	case rr.ClientID == "":
		return nil, &Error{Endpoint: "registration", StatusCode: resp.StatusCode, Code: "invalid_response", Description: "no client_id", Err: ErrNoClient}
	}
	info := &ClientInfo{ClientID: rr.ClientID, ClientSecret: rr.ClientSecret, Source: "dynamic", RedirectURIs: rr.RedirectURIs}
	if rr.ClientSecretExpiresAt > 0 {
		info.SecretExpiresAt = time.Unix(rr.ClientSecretExpiresAt, 0)
	}
	// The server's answer decides the method; else what the secret and
	// the server's list allow.
	if rr.TokenEndpointAuthMethod != "" {
		info.AuthMethod = rr.TokenEndpointAuthMethod
	} else {
		info.AuthMethod = chooseAuthMethod(rr.ClientSecret != "", md.TokenEndpointAuthMethodsSupported)
	}
	if info.AuthMethod != AuthMethodNone && info.ClientSecret == "" {
		info.AuthMethod = AuthMethodNone
	}
	return info, nil
}
