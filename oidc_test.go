package mcpvisor

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// A real authorization server (node-oidc-provider) in front of a mock MCP
// server that validates its JWT access tokens: dynamic registration, login
// with PKCE (the test drives the provider's interaction pages), calls,
// expiry and refresh with rotation, two supervisors sharing one token file
// without spending a refresh token twice (the provider revokes the grant
// on reuse), revocation → needs-auth → login → ready; no token in any log.
func TestOIDCProviderFullFlow(t *testing.T) {
	t.Parallel()
	const ttl = 3 // seconds: tokens expire during the test
	mock := serveMock(t, mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}})
	mu, err := url.Parse(mock.URL)
	require.NoError(t, err)
	rs, err := oauthtest.NewResourceServer("http://"+mu.Host, "mcp:tools")
	require.NoError(t, err)
	t.Cleanup(rs.Close)
	issuer := oauthtest.StartOIDCProvider(t, ".", rs.Resource(), ttl)
	rs.SetIssuer(issuer)

	store := filepath.Join(t.TempDir(), "tokens.json")
	var logs syncBuffer
	newSystem := func(name string) *Supervisor {
		opts := testOptions
		opts.Logger = zerolog.New(&logs).Level(zerolog.DebugLevel).With().Str("supervisor", name).Logger()
		opts.OAuth = OAuthOptions{Store: &oauth.FileStore{Path: store}, RefreshMargin: time.Second}
		return start(t, opts)
	}
	cfg := map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, rs.Resource())}

	a := newSystem("a")
	setAndSettle(t, a, cfg)
	st := statusOf(a, "r")
	require.Equal(t, StateNeedsAuth, st.State, st.LastError)
	require.NotNil(t, st.Auth)
	assert.Equal(t, "mcp:tools", st.Auth.NeedScope)

	login := func(s *Supervisor) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, s.Server("r").Login(ctx, &oauth.HeadlessUserAgent{Redirect: "http://127.0.0.1:8976/callback"}))
		require.NoError(t, s.WaitSettled(ctx))
		require.Equal(t, StateReady, statusOf(s, "r").State, statusOf(s, "r").LastError)
	}
	login(a)
	st = statusOf(a, "r")
	assert.Equal(t, issuer, st.Auth.Issuer)
	assert.Equal(t, "dynamic", st.Auth.ClientSource)
	assert.True(t, st.Auth.HasRefresh)
	_, err = call(t, a, "mcp__r__echo", "one")
	require.NoError(t, err)

	fs := &oauth.FileStore{Path: store}
	entry := func() *oauth.Entry {
		e, err := fs.Load(context.Background(), rs.Resource(), issuer)
		require.NoError(t, err)
		require.NotNil(t, e)
		return e
	}
	var seen sync.Map // every token value, to grep the logs for
	remember := func() {
		if e := entry(); e.Token != nil {
			seen.Store(e.Token.AccessToken, true)
			seen.Store(e.Token.RefreshToken, true)
		}
	}
	remember()
	firstRefresh := entry().Token.RefreshToken

	// Expiry: the next call refreshes first (rotation persisted).
	time.Sleep(ttl * time.Second) // testwait:ok not a wait: the token must expire
	_, err = call(t, a, "mcp__r__echo", "two")
	require.NoError(t, err)
	remember()
	assert.NotEqual(t, firstRefresh, entry().Token.RefreshToken, "the refresh token rotated and was persisted")
	assert.GreaterOrEqual(t, statusOf(a, "r").Auth.Refreshes, 1)

	// A second supervisor shares the token file: no login needed.
	b := newSystem("b")
	setAndSettle(t, b, cfg)
	require.Equal(t, StateReady, statusOf(b, "r").State, statusOf(b, "r").LastError)
	for round := range 2 {
		time.Sleep(ttl * time.Second) // testwait:ok not a wait: the token must expire
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for i := range 10 {
			for _, s := range []*Supervisor{a, b} {
				wg.Go(func() {
					_, err := call(t, s, "mcp__r__echo", "shared")
					if err != nil {
						errs <- err
					}
					_ = i
				})
			}
		}
		testwait.Call(t, "the calls of both supervisors", wg.Wait)
		close(errs)
		for err := range errs {
			t.Errorf("round %d: a call failed: %v", round, err)
		}
		remember()
	}
	assert.Equal(t, StateReady, statusOf(a, "r").State)
	assert.Equal(t, StateReady, statusOf(b, "r").State, "no refresh token was spent twice (the provider would have revoked the grant)")

	// Revocation: the grant ends; once the access token expires, the
	// server parks in needs-auth; login brings it back.
	e := entry()
	form := url.Values{"token": {e.Token.RefreshToken}, "token_type_hint": {"refresh_token"}, "client_id": {e.Client.ClientID}}
	resp, err := (&http.Client{Timeout: testwait.Patience}).PostForm(issuer+"/token/revocation", form)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	time.Sleep(ttl * time.Second) // testwait:ok not a wait: the token must expire
	_, err = call(t, a, "mcp__r__echo", "revoked")
	require.Error(t, err)
	assert.Equal(t, FailureAuth, ClassifyFailure(err))
	require.NoError(t, a.Server("r").Reconnect(t.Context()))
	require.Eventually(t, func() bool { return statusOf(a, "r").State == StateNeedsAuth }, 10*time.Second, 20*time.Millisecond)
	login(a)
	_, err = call(t, a, "mcp__r__echo", "back")
	require.NoError(t, err)
	remember()

	for _, r := range rs.Requests() {
		if r.Bearer != "" {
			seen.Store(r.Bearer, true)
		}
	}
	text := logs.String()
	n := 0
	seen.Range(func(k, _ any) bool {
		if tok := k.(string); tok != "" {
			n++
			assert.NotContains(t, text, tok, "a token value in the logs")
		}
		return true
	})
	t.Logf("%d token values checked against %d bytes of logs", n, len(text))
}

// DPoP with a real authorization server: node-oidc-provider checks the
// proofs at its token endpoint (demanding its nonce) and binds the JWT
// access token to the key (cnf.jkt); the resource demands DPoP-bound
// tokens and a nonce of its own, and verifies every proof. The refresh
// after expiry is bound to the same key (the provider refuses a refresh
// of a public client's bound grant without a proof by that key).
func TestOIDCProviderDPoP(t *testing.T) {
	t.Parallel()
	const ttl = 3
	mock := serveMock(t, mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}})
	mu, err := url.Parse(mock.URL)
	require.NoError(t, err)
	rs, err := oauthtest.NewResourceServer("http://"+mu.Host, "mcp:tools")
	require.NoError(t, err)
	t.Cleanup(rs.Close)
	rs.SetDPoP("rs-nonce-1")
	issuer := oauthtest.StartOIDCProvider(t, ".", rs.Resource(), ttl, "OIDC_DPOP_NONCE=1")
	rs.SetIssuer(issuer)

	var logs syncBuffer
	opts := testOptions
	opts.Logger = zerolog.New(&logs).Level(zerolog.DebugLevel)
	store := &oauth.FileStore{Path: filepath.Join(t.TempDir(), "tokens.json")}
	opts.OAuth = OAuthOptions{Store: store, RefreshMargin: time.Second,
		UserAgent: func(string) oauth.UserAgent {
			return &oauth.HeadlessUserAgent{Redirect: "http://127.0.0.1:8977/callback"}
		}}
	s := start(t, opts)
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, rs.Resource())})
	require.Equal(t, StateReady, statusOf(s, "r").State, statusOf(s, "r").LastError)
	_, err = call(t, s, "mcp__r__echo", "one")
	require.NoError(t, err)

	e, err := store.Load(context.Background(), rs.Resource(), issuer)
	require.NoError(t, err)
	require.NotNil(t, e.Token)
	assert.Equal(t, "DPoP", e.Token.TokenType)
	require.NotEmpty(t, e.Token.DPoPKey)
	first := e.Token.AccessToken

	time.Sleep(ttl * time.Second) // testwait:ok not a wait: the token must expire
	_, err = call(t, s, "mcp__r__echo", "two")
	require.NoError(t, err)
	e, err = store.Load(context.Background(), rs.Resource(), issuer)
	require.NoError(t, err)
	assert.NotEqual(t, first, e.Token.AccessToken, "refreshed")
	assert.GreaterOrEqual(t, statusOf(s, "r").Auth.Refreshes, 1)

	var served int
	for _, r := range rs.Requests() {
		if r.Valid && r.DPoP {
			served++
		}
	}
	assert.GreaterOrEqual(t, served, 2, "requests served with a DPoP-bound token and its proof, before and after the refresh")
	assert.Positive(t, rs.NonceChallenges(), "the resource's nonce was demanded and then sent")
	assert.NotContains(t, logs.String(), e.Token.DPoPKey, "the key is never logged")
	assert.NotContains(t, logs.String(), e.Token.AccessToken)
}
