package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
)

// HeadlessUserAgent is a UserAgent without a user: it GETs the
// authorization URL and follows redirects (keeping cookies) until one
// points at the redirect URI, which it does not follow but reads. It
// suits authorization servers that grant without interaction (the
// conformance suite's, a test server that auto-approves). Only http and
// https URLs are fetched.
type HeadlessUserAgent struct {
	// Redirect is the redirect URI. Default "http://127.0.0.1/callback"
	// (nothing listens there; the redirect is read, not followed).
	Redirect string
	// Client fetches the pages. Nil: a client with a cookie jar. Its
	// CheckRedirect is replaced.
	Client *http.Client
	// MaxHops bounds the redirects followed. Zero: 10.
	MaxHops int
}

// RedirectURI implements UserAgent.
func (h *HeadlessUserAgent) RedirectURI() string {
	if h.Redirect == "" {
		return "http://127.0.0.1/callback"
	}
	return h.Redirect
}

// errRedirectReached stops the client at the redirect URI.
var errRedirectReached = errors.New("redirect URI reached")

// Authorize implements UserAgent.
func (h *HeadlessUserAgent) Authorize(ctx context.Context, authURL string) (url.Values, error) {
	var client http.Client
	if h.Client != nil {
		client = *h.Client
	}
	if client.Jar == nil {
		jar, _ := cookiejar.New(nil)
		client.Jar = jar
	}
	hops := h.MaxHops
	if hops <= 0 {
		hops = 10
	}
	redirect := h.RedirectURI()
	var reached *url.URL
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if matchesRedirect(req.URL, redirect) {
			reached = req.URL
			return errRedirectReached
		}
		if len(via) >= hops {
			return fmt.Errorf("more than %d redirects", hops)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirect to a %q URL", req.URL.Scheme)
		}
		return nil
	}
	if err := checkEndpoint(authURL); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if reached != nil {
		if resp != nil {
			resp.Body.Close()
		}
		return reached.Query(), nil
	}
	if err != nil {
		return nil, stripURLError(err)
	}
	defer resp.Body.Close()
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	// The first answer may itself be the redirect (CheckRedirect is not
	// called for a Location the client does not follow).
	if loc, err := resp.Location(); err == nil && matchesRedirect(loc, redirect) {
		return loc.Query(), nil
	}
	return nil, fmt.Errorf("oauth: the authorization server answered %d without redirecting to %s", resp.StatusCode, redirect)
}

// matchesRedirect reports whether u is the redirect URI (scheme, host,
// port and path; the query is the response).
func matchesRedirect(u *url.URL, redirect string) bool {
	r, err := url.Parse(redirect)
	if err != nil {
		return false
	}
	return strings.EqualFold(u.Scheme, r.Scheme) && strings.EqualFold(u.Host, r.Host) && u.Path == r.Path
}
