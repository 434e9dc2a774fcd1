package actors

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// oidcProvider runs testdata/oidc/provider.mjs (node-oidc-provider) for
// resource, and returns its issuer. The modules come from
// $MCPVISOR_OIDC_MODULES (default ../.deps/npm-oidc/node_modules, which
// `make deps` installs), node from $MCPVISOR_NODE (default the Node 22 of
// ../.deps/conformance-<version>, else node on PATH). Without them the test is
// skipped, unless MCPVISOR_REQUIRE_INTEROP is set.
func oidcProvider(t *testing.T, resource string, ttl int, env ...string) string {
	t.Helper()
	modules := os.Getenv("MCPVISOR_OIDC_MODULES")
	if modules == "" {
		modules, _ = filepath.Abs("../.deps/npm-oidc/node_modules")
	}
	node := os.Getenv("MCPVISOR_NODE")
	if node == "" {
		node = "node"
		if found, _ := filepath.Glob("../.deps/conformance-*/node_modules/.bin/node"); len(found) > 0 {
			node, _ = filepath.Abs(found[len(found)-1])
		}
	}
	if _, err := os.Stat(filepath.Join(modules, "oidc-provider")); err != nil {
		if os.Getenv("MCPVISOR_REQUIRE_INTEROP") != "" {
			t.Fatalf("oidc-provider is not installed in %s (make deps)", modules)
		}
		t.Skipf("oidc-provider is not installed in %s (make deps)", modules)
	}
	script, err := filepath.Abs("../testdata/oidc/provider.mjs")
	require.NoError(t, err)
	cmd := exec.Command(node, script)
	cmd.Env = append(os.Environ(), "OIDC_MODULES="+modules, "OIDC_RESOURCE="+resource, "OIDC_SCOPES=mcp:tools",
		"OIDC_TTL="+strconv.Itoa(ttl))
	cmd.Env = append(cmd.Env, env...)
	ownGroup(cmd)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	require.NoError(t, cmd.Start())
	cmd.WaitDelay = time.Second
	t.Cleanup(func() {
		killTree(cmd)
		_ = testwait.Result(t, "the exit of the authorization server", cmd.Wait)
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if issuer, ok := strings.CutPrefix(sc.Text(), "OIDC_READY "); ok {
				ready <- issuer
			}
		}
	}()
	select {
	case issuer := <-ready:
		return issuer
	case <-time.After(30 * time.Second):
		t.Fatalf("oidc-provider did not start; stderr:\n%s", stderr.String())
	}
	return ""
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A real authorization server (node-oidc-provider) in front of a mock MCP
// server that validates its JWT access tokens: dynamic registration, login
// with PKCE (the test drives the provider's interaction pages), calls,
// expiry and refresh with rotation, two supervisors sharing one token file
// without spending a refresh token twice (the provider revokes the grant
// on reuse), revocation → needs-auth → login → ready; no token in any log.
func TestOIDCProviderFullFlow(t *testing.T) {
	const ttl = 3 // seconds: tokens expire during the test
	mock := serveMock(t, mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}})
	mu, err := url.Parse(mock.URL)
	require.NoError(t, err)
	rs, err := oauthtest.NewResourceServer("http://"+mu.Host, "mcp:tools")
	require.NoError(t, err)
	t.Cleanup(rs.Close)
	issuer := oidcProvider(t, rs.Resource(), ttl)
	rs.SetIssuer(issuer)

	store := filepath.Join(t.TempDir(), "tokens.json")
	var logs syncBuffer
	newSystem := func(name string) *System {
		opts := testOptions
		opts.Logger = zerolog.New(&logs).Level(zerolog.DebugLevel).With().Str("supervisor", name).Logger()
		opts.OAuth = OAuthOptions{Store: &oauth.FileStore{Path: store}, RefreshMargin: time.Second}
		return start(t, opts)
	}
	cfg := map[string]ServerConfig{"r": remote(transports.TypeHTTP, rs.Resource())}

	a := newSystem("a")
	setAndSettle(t, a, cfg)
	st := statusOf(a, "r")
	require.Equal(t, StateNeedsAuth, st.State, st.LastError)
	require.NotNil(t, st.Auth)
	assert.Equal(t, "mcp:tools", st.Auth.NeedScope)

	login := func(s *System) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, s.Login(ctx, "r", &oauth.HeadlessUserAgent{Redirect: "http://127.0.0.1:8976/callback"}))
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
			for _, s := range []*System{a, b} {
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
	require.NoError(t, a.Reconnect(t.Context(), "r"))
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
	const ttl = 3
	mock := serveMock(t, mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}})
	mu, err := url.Parse(mock.URL)
	require.NoError(t, err)
	rs, err := oauthtest.NewResourceServer("http://"+mu.Host, "mcp:tools")
	require.NoError(t, err)
	t.Cleanup(rs.Close)
	rs.SetDPoP("rs-nonce-1")
	issuer := oidcProvider(t, rs.Resource(), ttl, "OIDC_DPOP_NONCE=1")
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
	setAndSettle(t, s, map[string]ServerConfig{"r": remote(transports.TypeHTTP, rs.Resource())})
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
