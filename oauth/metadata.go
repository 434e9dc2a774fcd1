package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/mcpvisor/mcpvisor/transports"
)

// ResourceMetadata is OAuth 2.0 protected resource metadata (RFC 9728
// §2), as far as an MCP client uses it.
type ResourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers,omitempty"`
	ScopesSupported      []string `json:"scopes_supported,omitempty"`
	// DPoPBoundAccessTokensRequired says the resource accepts DPoP-bound
	// tokens only (RFC 9449 §5.2 of RFC 9728's registry).
	DPoPBoundAccessTokensRequired bool `json:"dpop_bound_access_tokens_required,omitempty"`
	// URL is where the metadata was found (not part of the document).
	URL string `json:"-"`
}

// ServerMetadata is authorization server metadata (RFC 8414 §2, and the
// OpenID Connect Discovery members of the same names).
type ServerMetadata struct {
	Issuer                                     string   `json:"issuer"`
	AuthorizationEndpoint                      string   `json:"authorization_endpoint,omitempty"`
	TokenEndpoint                              string   `json:"token_endpoint,omitempty"`
	RegistrationEndpoint                       string   `json:"registration_endpoint,omitempty"`
	RevocationEndpoint                         string   `json:"revocation_endpoint,omitempty"`
	ScopesSupported                            []string `json:"scopes_supported,omitempty"`
	ResponseTypesSupported                     []string `json:"response_types_supported,omitempty"`
	GrantTypesSupported                        []string `json:"grant_types_supported,omitempty"`
	CodeChallengeMethodsSupported              []string `json:"code_challenge_methods_supported,omitempty"`
	TokenEndpointAuthMethodsSupported          []string `json:"token_endpoint_auth_methods_supported,omitempty"`
	ClientIDMetadataDocumentSupported          bool     `json:"client_id_metadata_document_supported,omitempty"`
	AuthorizationResponseISSParameterSupported bool     `json:"authorization_response_iss_parameter_supported,omitempty"`
	// DPoPSigningAlgValuesSupported are the DPoP proof algorithms the
	// server accepts (RFC 9449 §5.1); absent: no DPoP.
	DPoPSigningAlgValuesSupported []string `json:"dpop_signing_alg_values_supported,omitempty"`
	// URL is where the metadata was found; empty for the 2025-03-26
	// default endpoints (Legacy).
	URL string `json:"-"`
	// Legacy is set for metadata of the 2025-03-26 fallback (the MCP
	// server's origin as the authorization server).
	Legacy bool `json:"-"`
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// CanonicalResource returns the canonical URI of an MCP server for the
// resource parameter (RFC 8707; MCP "Canonical Server URI"): lower-case
// scheme and host, no fragment, no trailing slash.
func CanonicalResource(serverURL string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("oauth: server URL: %w", transports.RedactURLError(err))
	}
	if u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("oauth: server URL %q is not absolute", transports.SafeURLString(serverURL))
	}
	u.Scheme = httpScheme(strings.ToLower(u.Scheme))
	u.Host = strings.ToLower(u.Host)
	u.Fragment, u.RawFragment = "", ""
	u.User = nil
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u.String(), nil
}

// httpScheme maps a scheme to the HTTP scheme of the same resource, as
// the transport kind that accepts it registered (a WebSocket MCP server is
// the HTTP resource of the same URL: ws → http, wss → https).
func httpScheme(scheme string) string { return transports.HTTPScheme(scheme) }

// origin returns scheme://host of u.
func origin(u *url.URL) string {
	return httpScheme(strings.ToLower(u.Scheme)) + "://" + strings.ToLower(u.Host)
}

// resourceMatches reports whether the resource a PRM document names may
// be used for the MCP server at canonical: the same canonical URI, or the
// server's bare origin (a root PRM document describes the whole host).
func resourceMatches(prmResource, canonical string) bool {
	c, err := CanonicalResource(prmResource)
	if err != nil {
		return false
	}
	if c == canonical {
		return true
	}
	u, err := url.Parse(canonical)
	if err != nil {
		return false
	}
	return c == origin(u)
}

// checkEndpoint refuses URLs that are not https, or http to a loopback
// host (RFC 8252, MCP "Communication Security").
func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInsecureEndpoint, err)
	}
	switch u.Scheme {
	case "https":
		if u.Host == "" {
			return fmt.Errorf("%w: %q has no host", ErrInsecureEndpoint, raw)
		}
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
	}
	return fmt.Errorf("%w: %q", ErrInsecureEndpoint, raw)
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// maxMetadata bounds a metadata document or endpoint response.
const maxMetadata = 1 << 20

// fetchStatus is the outcome of one metadata GET.
type fetchStatus int

const (
	fetchOK        fetchStatus = iota
	fetchNotFound              // a 4xx, or not JSON: try the next URL
	fetchTransient             // network error or 5xx/429
)

// getJSON fetches u into out.
func getJSON(ctx context.Context, client *http.Client, u string, out any) (fetchStatus, error) {
	if err := checkEndpoint(u); err != nil {
		return fetchNotFound, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fetchNotFound, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fetchTransient, ctx.Err()
		}
		return fetchTransient, fmt.Errorf("%w: GET %s: %w", ErrTransient, u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadata))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fetchTransient, fmt.Errorf("%w: GET %s answered %d", ErrTransient, u, resp.StatusCode)
	case resp.StatusCode >= 300:
		return fetchNotFound, fmt.Errorf("GET %s answered %d", u, resp.StatusCode)
	case err != nil:
		return fetchTransient, fmt.Errorf("%w: GET %s: %w", ErrTransient, u, err)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fetchNotFound, fmt.Errorf("GET %s: not a metadata document: %w", u, err)
	}
	return fetchOK, nil
}

// ResourceMetadataURLs lists where the protected resource metadata of the
// MCP server at serverURL is looked for, in the order of the MCP
// specification (2025-11-25, "Protected Resource Metadata Discovery
// Requirements"): the challenge's resource_metadata, then the path-aware
// well-known URL, then the root one.
func ResourceMetadataURLs(serverURL, fromChallenge string) ([]string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, err
	}
	var out []string
	if fromChallenge != "" {
		out = append(out, fromChallenge)
	}
	if p := strings.TrimRight(u.EscapedPath(), "/"); p != "" {
		out = append(out, origin(u)+"/.well-known/oauth-protected-resource"+p)
	}
	out = append(out, origin(u)+"/.well-known/oauth-protected-resource")
	return out, nil
}

// DiscoverResource finds the protected resource metadata of the MCP server
// at serverURL, trying ResourceMetadataURLs in order and continuing past
// 4xx answers. It returns (nil, nil) when no URL has any (the 2025-03-26
// fallback applies), an error wrapping ErrTransient when some URL could
// not be reached and none answered, and ErrResourceMismatch when the
// document is for another resource.
func DiscoverResource(ctx context.Context, client *http.Client, serverURL, fromChallenge string) (*ResourceMetadata, error) {
	canonical, err := CanonicalResource(serverURL)
	if err != nil {
		return nil, err
	}
	urls, err := ResourceMetadataURLs(serverURL, fromChallenge)
	if err != nil {
		return nil, err
	}
	var transient error
	for _, u := range urls {
		var md ResourceMetadata
		st, err := getJSON(ctx, client, u, &md)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		switch st {
		case fetchTransient:
			transient = err
			continue
		case fetchNotFound:
			continue
		}
		md.URL = u
		if md.Resource == "" || !resourceMatches(md.Resource, canonical) {
			return nil, fmt.Errorf("%w: %q names %q, the server is %q", ErrResourceMismatch, u, transports.SafeURLString(md.Resource), transports.SafeURLString(canonical))
		}
		if len(md.AuthorizationServers) == 0 {
			return nil, fmt.Errorf("%w: %s lists no authorization_servers", ErrNoAuthServer, u)
		}
		return &md, nil
	}
	return nil, transient
}

// ServerMetadataURLs lists where the metadata of the authorization server
// issuer is looked for, in the order of the MCP specification
// (2025-11-25, "Authorization Server Metadata Discovery"): RFC 8414 then
// OpenID Connect Discovery, path-inserted forms first for an issuer with
// a path (and never the root forms then), then the OIDC path-appended form.
func ServerMetadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("oauth: issuer %q is not absolute", issuer)
	}
	o := origin(u)
	p := strings.TrimRight(u.EscapedPath(), "/")
	if p == "" {
		return []string{
			o + "/.well-known/oauth-authorization-server",
			o + "/.well-known/openid-configuration",
		}, nil
	}
	return []string{
		o + "/.well-known/oauth-authorization-server" + p,
		o + "/.well-known/openid-configuration" + p,
		o + p + "/.well-known/openid-configuration",
	}, nil
}

// issuerMatches compares the issuer in metadata with the one used to
// fetch it: exactly, tolerating only a trailing slash on an issuer
// without a path (RFC 8414 §3.3; servers differ on "https://as/" vs
// "https://as").
func issuerMatches(got, want string) bool {
	if got == want {
		return true
	}
	u, err := url.Parse(want)
	if err != nil || strings.Trim(u.Path, "/") != "" {
		return false
	}
	return strings.TrimRight(got, "/") == strings.TrimRight(want, "/")
}

// DiscoverServer fetches the metadata of the authorization server issuer
// (see ServerMetadataURLs), checks that it names the same issuer and has
// the endpoints a client needs. ErrNoAuthServer (or ErrTransient when
// some URL was unreachable) when none is found.
func DiscoverServer(ctx context.Context, client *http.Client, issuer string) (*ServerMetadata, error) {
	urls, err := ServerMetadataURLs(issuer)
	if err != nil {
		return nil, err
	}
	var transient, last error
	for _, u := range urls {
		var md ServerMetadata
		st, err := getJSON(ctx, client, u, &md)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		switch st {
		case fetchTransient:
			transient = err
			continue
		case fetchNotFound:
			last = err
			continue
		}
		if !issuerMatches(md.Issuer, issuer) {
			// Mismatching metadata MUST NOT be used (RFC 8414 §3.3).
			return nil, fmt.Errorf("%w: %s says issuer %q, expected %q", ErrIssuerMismatch, u, md.Issuer, issuer)
		}
		md.URL = u
		if err := md.validate(); err != nil {
			return nil, err
		}
		return &md, nil
	}
	if transient != nil {
		return nil, transient
	}
	return nil, fmt.Errorf("%w: %s (%v)", ErrNoAuthServer, issuer, last)
}

func (md *ServerMetadata) validate() error {
	for _, e := range []string{md.AuthorizationEndpoint, md.TokenEndpoint, md.RegistrationEndpoint, md.RevocationEndpoint} {
		if e == "" {
			continue
		}
		if err := checkEndpoint(e); err != nil {
			return err
		}
	}
	if md.TokenEndpoint == "" {
		return fmt.Errorf("%w: metadata of %s has no token_endpoint", ErrNoAuthServer, md.Issuer)
	}
	return nil
}

// legacyServer returns the authorization server of a 2025-03-26 MCP
// server without protected resource metadata: the MCP server's origin,
// its RFC 8414 metadata if it has any (its issuer is not checked: the
// 2025-03-26 specification predates that rule), else the default
// endpoints /authorize, /token and /register there. PKCE was mandatory
// in 2025-03-26, so S256 is assumed for the defaults.
func legacyServer(ctx context.Context, client *http.Client, serverURL string) (*ServerMetadata, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, err
	}
	o := origin(u)
	var transient error
	for _, mu := range []string{o + "/.well-known/oauth-authorization-server", o + "/.well-known/openid-configuration"} {
		var md ServerMetadata
		st, err := getJSON(ctx, client, mu, &md)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if st == fetchTransient {
			transient = err
			continue
		}
		if st != fetchOK {
			continue
		}
		if md.Issuer == "" {
			md.Issuer = o
		}
		md.URL, md.Legacy = mu, true
		if err := md.validate(); err != nil {
			return nil, err
		}
		return &md, nil
	}
	if transient != nil {
		return nil, transient
	}
	if err := checkEndpoint(o); err != nil {
		return nil, err
	}
	return &ServerMetadata{
		Issuer:                        o,
		AuthorizationEndpoint:         o + "/authorize",
		TokenEndpoint:                 o + "/token",
		RegistrationEndpoint:          o + "/register",
		CodeChallengeMethodsSupported: []string{"S256"},
		Legacy:                        true,
	}, nil
}

// isTransient reports whether err means "try again later".
func isTransient(err error) bool { return errors.Is(err, ErrTransient) }
