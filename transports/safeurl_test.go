package transports_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/httpclient"
)

func TestSafeURLDropsUserInfoQueryAndFragment(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://example.com/mcp", "https://example.com/mcp"},
		{"https://tok3n@example.com:8443/mcp?api_key=k3y&x=1#frag", "https://example.com:8443/mcp"},
		{"http://user:pa55@127.0.0.1/mcp?", "http://127.0.0.1/mcp"},
		{"ws://[::1]:9/ws?token=t", "ws://[::1]:9/ws"},
		{"mailto:s3cret@example.com", "mailto:"},
		{"http://a b/?api_key=k3y", "(an invalid URL)"},
	} {
		assert.Equal(t, tc.want, transports.SafeURLString(tc.in), tc.in)
	}
	assert.Equal(t, "", transports.SafeURL(nil))
}

// net/http's errors quote the whole URL of a failed request; redacted,
// they name it without user info or query, and still match what they
// wrap: the *url.Error (with its Timeout), the dial error, the class.
func TestRedactURLErrorKeepsTheChainAndDropsTheSecrets(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	raw := "http://us3r:pa55@" + addr + "/mcp?api_key=k3y"
	req, err := http.NewRequestWithContext(testwait.Context(t), http.MethodPost, raw, nil)
	require.NoError(t, err)
	_, doErr := http.DefaultClient.Do(req)
	require.Error(t, doErr)
	require.Contains(t, doErr.Error(), "k3y", "net/http quotes the query")

	check := func(err error) {
		t.Helper()
		for _, secret := range []string{"us3r", "pa55", "k3y"} {
			assert.NotContains(t, err.Error(), secret)
		}
		assert.Contains(t, err.Error(), "http://"+addr+"/mcp")
		var ue *url.Error
		require.ErrorAs(t, err, &ue)
		assert.Equal(t, "http://"+addr+"/mcp", ue.URL)
		assert.NotContains(t, ue.Error(), "k3y")
		assert.ErrorIs(t, err, syscall.ECONNREFUSED)
		assert.Equal(t, transports.ClassRefused, transports.Classify(err))
	}
	top := transports.RedactURLError(doErr)
	check(top)
	_, isURLErr := top.(*url.Error)
	assert.True(t, isURLErr, "a *url.Error stays one")

	// Under a wrapper that copied its text (as WebSocket libraries do).
	deep := transports.RedactURLError(fmt.Errorf("failed to dial: %w", doErr))
	check(deep)
	assert.Contains(t, deep.Error(), "failed to dial: ")

	// url.Parse quotes the URL it refuses.
	_, perr := url.Parse("http://a b/?api_key=k3y")
	require.Contains(t, perr.Error(), "k3y")
	assert.NotContains(t, transports.RedactURLError(perr).Error(), "k3y")

	assert.NoError(t, transports.RedactURLError(nil))
	plain := errors.New("no URL here")
	assert.Same(t, plain, transports.RedactURLError(plain))
	assert.ErrorIs(t, transports.RedactURLError(&url.Error{Op: "Get", URL: raw, Err: context.Canceled}), context.Canceled)
}

// The config errors of a URL name it without its secrets.
func TestParseURLErrorsHideSecrets(t *testing.T) {
	for _, raw := range []string{"http://a b/mcp?api_key=k3y", "ftp://us3r:pa55@example.com/?api_key=k3y", "/relative?api_key=k3y"} {
		_, err := httpclient.ParseURL(raw, "http", "https")
		require.Error(t, err, raw)
		assert.Equal(t, transports.ClassConfig, transports.Classify(err))
		for _, secret := range []string{"us3r", "pa55", "k3y"} {
			assert.NotContains(t, err.Error(), secret, raw)
		}
	}
}

// A redirect is refused, naming its target without its secrets (net/http
// quotes the Location in its *url.Error, which RedactURLError reduces).
func TestRefusedRedirectHidesSecrets(t *testing.T) {
	srv := httptest.NewServer(http.RedirectHandler("http://us3r:pa55@example.com/elsewhere?api_key=k3y", http.StatusFound))
	t.Cleanup(srv.Close)
	c, err := httpclient.New(transports.Config{}, httpclient.Options{})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(testwait.Context(t), http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	_, err = c.Do(req)
	require.Error(t, err)
	err = transports.RedactURLError(err)
	assert.Contains(t, err.Error(), "http://example.com/elsewhere")
	for _, secret := range []string{"us3r", "pa55", "k3y"} {
		assert.NotContains(t, err.Error(), secret)
	}
}

// The values of a config a server may repeat, and only those: secret
// env, header and flag values, a bearer token alone, user info and query
// values of URLs; short values and plain settings are left alone.
func TestConfigSecretsAndScrub(t *testing.T) {
	cfg := transports.Config{
		Command: "server",
		Args:    []string{"--api-key", "argkey-1", "--token=argtok-2", "--verbose", "--db=postgres://dbuser:dbpass-3@h/x", "plain-value"},
		Env:     map[string]string{"GITHUB_TOKEN": "envtok-4", "MODE": "production", "DATABASE_URL": "postgres://u:envpass-5@h/db?sslkey=qval-6"},
		Headers: map[string]string{"Authorization": "Bearer hdrtok-7", "Accept": "application/json"},
		URL:     "https://urluser-8:urlpass-9@example.com/mcp?api_key=urlkey-10&x=1",
	}
	got := transports.ConfigSecrets(cfg)
	for _, want := range []string{"argkey-1", "argtok-2", "dbpass-3", "dbuser", "envtok-4", "envpass-5", "qval-6",
		"Bearer hdrtok-7", "hdrtok-7", "urluser-8", "urlpass-9", "urlkey-10"} {
		assert.Contains(t, got, want)
	}
	for _, not := range []string{"production", "application/json", "plain-value", "server", "1"} {
		assert.NotContains(t, got, not)
	}
	text := []byte("auth Bearer hdrtok-7 failed for envtok-4 in production")
	assert.Equal(t, "auth [redacted] failed for [redacted] in production", string(transports.Scrub(text, got)))
	clean := []byte("nothing to hide")
	assert.Equal(t, "nothing to hide", string(transports.Scrub(clean, got)))
}

// A proxy setting that does not parse is reported without being quoted:
// it may hold the proxy's credentials.
func TestProxyErrorsHideTheProxySetting(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	proxy := func(*http.Request) (*url.URL, error) {
		_, err := url.Parse("http://proxyuser:pr0xy-pass@proxy example:3128")
		return nil, fmt.Errorf("invalid proxy address %q: %v", "http://proxyuser:pr0xy-pass@proxy example:3128", err)
	}
	c, err := httpclient.New(transports.Config{}, httpclient.Options{Proxy: proxy})
	require.NoError(t, err)
	for _, target := range []string{srv.URL, "https://example.com/mcp"} { // the inline transport, and net/http's
		req, err := http.NewRequestWithContext(testwait.Context(t), http.MethodPost, target, nil)
		require.NoError(t, err)
		_, err = c.Do(req)
		require.Error(t, err, target)
		assert.ErrorIs(t, err, httpclient.ErrProxy, target)
		assert.Equal(t, transports.ClassConfig, transports.Classify(err), target)
		assert.NotContains(t, err.Error(), "pr0xy-pass", target)
		assert.NotContains(t, err.Error(), "proxyuser", target)
	}
}
