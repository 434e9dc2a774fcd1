package authn

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxDocument bounds the metadata, key set and introspection answers read.
const maxDocument = 1 << 20

// serverMetadata is what the Validator uses of the authorization server's
// metadata (RFC 8414 §2).
type serverMetadata struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
}

// metadataURLs are where the metadata of issuer may be, in the order the
// MCP authorization specification gives: RFC 8414 then OpenID Connect
// discovery, path-aware (a path issuer never falls back to the root).
func metadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("authn: issuer %q is not an http(s) URL without query or fragment", issuer)
	}
	origin := u.Scheme + "://" + u.Host
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	if path == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}, nil
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + path,
		origin + "/.well-known/openid-configuration" + path,
		origin + path + "/.well-known/openid-configuration",
	}, nil
}

// sameIssuer compares a metadata issuer with the configured one exactly,
// tolerating only the slash after a path-less issuer.
func sameIssuer(got, want string) bool {
	if got == want {
		return true
	}
	u, err := url.Parse(want)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return false
	}
	return strings.TrimSuffix(got, "/") == strings.TrimSuffix(want, "/")
}

// discover fetches the issuer's metadata, trying each URL in turn.
func (v *Validator) discover(ctx context.Context) (serverMetadata, error) {
	urls, err := metadataURLs(v.opts.Issuer)
	if err != nil {
		return serverMetadata{}, err
	}
	var last error
	for _, u := range urls {
		var md serverMetadata
		status, err := v.getJSON(ctx, u, &md)
		if err != nil {
			last = err
			continue
		}
		if status != http.StatusOK {
			last = fmt.Errorf("%s: HTTP %d", u, status)
			continue
		}
		if !sameIssuer(md.Issuer, v.opts.Issuer) {
			// RFC 8414 §3.3: metadata naming another issuer must not be used.
			return serverMetadata{}, fmt.Errorf("%s names issuer %q, not %q", u, md.Issuer, v.opts.Issuer)
		}
		return md, nil
	}
	return serverMetadata{}, fmt.Errorf("no authorization server metadata for %s: %v", v.opts.Issuer, last)
}

// getJSON GETs u and decodes a 200 answer into out; it returns the status.
func (v *Validator) getJSON(ctx context.Context, u string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDocument))
		return resp.StatusCode, nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return 0, err
	}
	if len(b) > maxDocument {
		return 0, fmt.Errorf("%s: answer over %d bytes", u, maxDocument)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return 0, fmt.Errorf("%s: %v", u, err)
	}
	return resp.StatusCode, nil
}
