package oauth_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// exchangeWorld is a real authorization server (node-oidc-provider, with
// the token exchange grant of testdata/oidc/provider.mjs) for two
// resources in front of one mock MCP server: G, the gateway's resource,
// whose tokens callers hold, and U, the upstream the gateway exchanges
// them for. Both validate the provider's JWTs.
type exchangeWorld struct {
	issuer string
	g, u   *oauthtest.ResourceServer
	logs   *syncBuffer
	log    zerolog.Logger
}

func newExchangeWorld(t *testing.T, ttl int) *exchangeWorld {
	t.Helper()
	mock, err := mockserver.Serve(context.Background(), mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mock.Close() })
	mu, err := url.Parse(mock.URL)
	require.NoError(t, err)
	w := &exchangeWorld{logs: &syncBuffer{}}
	w.log = zerolog.New(w.logs).Level(zerolog.DebugLevel)
	for _, rs := range []**oauthtest.ResourceServer{&w.g, &w.u} {
		*rs, err = oauthtest.NewResourceServer("http://"+mu.Host, "mcp:tools")
		require.NoError(t, err)
		t.Cleanup((*rs).Close)
	}
	// Only G's tokens may be exchanged (a token for U is for another
	// audience).
	w.issuer = oauthtest.StartOIDCProvider(t, "..", w.g.Resource()+" "+w.u.Resource(), ttl,
		"OIDC_EXCHANGE_FROM="+w.g.Resource())
	w.g.SetIssuer(w.issuer)
	w.u.SetIssuer(w.issuer)
	return w
}

// caller logs account in at G by the code flow and returns its source:
// the caller's token, refreshed by the source when it expires.
func (w *exchangeWorld) caller(t *testing.T, account string) (*oauth.Source, *oauth.MemoryStore) {
	t.Helper()
	oauthtest.ConfigureOIDCProvider(t, w.issuer, url.Values{"account": {account}})
	store := &oauth.MemoryStore{}
	src, err := oauth.NewSource(oauth.Config{ServerURL: w.g.Resource(), Store: store, Logger: w.log,
		UserAgent: &oauth.HeadlessUserAgent{Redirect: "http://127.0.0.1:8976/callback"}})
	require.NoError(t, err)
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, src.Login(c, nil, ""))
	return src, store
}

// subjects is a Config.SubjectToken that records what it returned.
type subjects struct {
	mu   sync.Mutex
	next func(context.Context) (string, error)
	got  []string
}

func (s *subjects) token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, err := s.next(ctx)
	s.got = append(s.got, tok)
	return tok, err
}

func (s *subjects) given() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// tokenRequests records the forms the source posts to the token endpoint.
type tokenRequests struct {
	mu    sync.Mutex
	forms []url.Values
	basic []bool
}

func (r *tokenRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/token") && req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		form, _ := url.ParseQuery(string(b))
		_, _, basic := req.BasicAuth()
		r.mu.Lock()
		r.forms, r.basic = append(r.forms, form), append(r.basic, basic)
		r.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	return http.DefaultTransport.RoundTrip(req)
}

func (r *tokenRequests) all() []url.Values {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]url.Values(nil), r.forms...)
}

// exchanger is the gateway's source for U on behalf of one caller.
func (w *exchangeWorld) exchanger(t *testing.T, client string, subj *subjects, now func() time.Time) (*oauth.Source, *tokenRequests) {
	t.Helper()
	reqs := &tokenRequests{}
	src, err := oauth.NewSource(oauth.Config{
		ServerURL:    w.u.Resource(),
		Grant:        oauth.GrantTokenExchange,
		ClientID:     client,
		ClientSecret: client + "-secret",
		SubjectToken: subj.token,
		Store:        &oauth.MemoryStore{},
		HTTPClient:   &http.Client{Transport: reqs, Timeout: 10 * time.Second},
		Now:          now,
		Logger:       w.log,
	})
	require.NoError(t, err)
	return src, reqs
}

// initialize posts an MCP initialize request to u through src's
// Transport.
func initialize(t *testing.T, src *oauth.Source, u string) (int, error) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + protocol.Version20251125 +
		`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, err := http.NewRequestWithContext(c, http.MethodPost, u, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := (&http.Client{Transport: &oauth.Transport{Source: src}}).Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// lastValid returns the claims of the last token rs accepted.
func lastValid(t *testing.T, rs *oauthtest.ResourceServer) (string, map[string]any) {
	t.Helper()
	reqs := rs.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Valid {
			claims, err := oauthtest.JWTClaims(reqs[i].Bearer)
			require.NoError(t, err)
			return reqs[i].Bearer, claims
		}
	}
	t.Fatal("no request with a valid token")
	return "", nil
}

// The gateway exchanges each caller's token for G (obtained by the code
// flow, as two users one after the other) for a token for U with the
// caller's sub, which U accepts; when the U token expires — seen by the
// source's clock, or only by U's 401 — it exchanges again, with the
// caller's current (refreshed) token, asked afresh. No token value
// appears in the logs.
func TestTokenExchangeWithOIDCProvider(t *testing.T) {
	const ttl = 3 // seconds: tokens expire during the test
	w := newExchangeWorld(t, ttl)

	type user struct {
		name    string
		caller  *oauth.Source
		store   *oauth.MemoryStore
		subj    *subjects
		src     *oauth.Source
		reqs    *tokenRequests
		firstU  string
		firstAt int // index in U's requests after the first call
	}
	var users []*user
	var lag atomic.Int64 // how far bob's source's clock lags
	for _, name := range []string{"alice", "bob"} {
		caller, store := w.caller(t, name)
		tok, err := caller.Token(context.Background())
		require.NoError(t, err)
		claims, err := oauthtest.JWTClaims(tok)
		require.NoError(t, err)
		require.Equal(t, name, claims["sub"], "the caller's token is %s's", name)
		require.Equal(t, w.g.Resource(), claims["aud"])
		u := &user{name: name, caller: caller, store: store, subj: &subjects{next: caller.Token}}
		var now func() time.Time
		if name == "bob" {
			// Bob's source's clock stops short of his U token's expiry
			// (once he has one): only U's 401 tells it.
			now = func() time.Time { return time.Now().Add(-time.Duration(lag.Load())) }
		}
		u.src, u.reqs = w.exchanger(t, "mcpvisor-gateway", u.subj, now)
		users = append(users, u)
	}

	for _, u := range users {
		status, err := initialize(t, u.src, w.u.Resource())
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
		tok, claims := lastValid(t, w.u)
		assert.Equal(t, u.name, claims["sub"], "U got a token with the caller's sub")
		assert.Equal(t, w.u.Resource(), claims["aud"])
		assert.Equal(t, map[string]any{"sub": "mcpvisor-gateway"}, claims["act"])
		assert.Equal(t, []any{"team-" + u.name}, claims["groups"], "the caller's claims")
		u.firstU, u.firstAt = tok, len(w.u.Requests())

		require.Len(t, u.subj.given(), 1)
		forms := u.reqs.all()
		require.Len(t, forms, 1)
		f := forms[0]
		assert.Equal(t, oauth.GrantTokenExchange, f.Get("grant_type"))
		assert.Equal(t, u.subj.given()[0], f.Get("subject_token"))
		assert.Equal(t, oauth.TokenTypeAccessToken, f.Get("subject_token_type"))
		assert.Equal(t, oauth.TokenTypeAccessToken, f.Get("requested_token_type"))
		assert.Equal(t, w.u.Resource(), f.Get("resource"))
		assert.Equal(t, "mcp:tools", f.Get("scope"))
		assert.Empty(t, f.Get("client_secret"), "client_secret_basic")
		st := u.src.Status()
		assert.True(t, st.Authorized)
		assert.False(t, st.HasRefresh, "no refresh token kept")
	}

	lag.Store(int64(time.Hour))
	time.Sleep(ttl * time.Second) // testwait:ok not a wait: the tokens must expire
	for _, u := range users {
		status, err := initialize(t, u.src, w.u.Resource())
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, u.name)
		given := u.subj.given()
		require.Len(t, given, 2, "%s: the subject token was asked again", u.name)
		assert.NotEqual(t, given[0], given[1], "%s: the caller's refreshed token was exchanged", u.name)
		forms := u.reqs.all()
		require.Len(t, forms, 2, u.name)
		assert.Equal(t, given[1], forms[1].Get("subject_token"))
		for _, f := range forms {
			assert.Empty(t, f.Get("refresh_token"), "no refresh grant")
		}
		tok, claims := lastValid(t, w.u)
		assert.NotEqual(t, u.firstU, tok)
		assert.Equal(t, u.name, claims["sub"])

		var refused int
		for _, r := range w.u.Requests()[u.firstAt:] {
			if r.Bearer == u.firstU && !r.Valid {
				refused++
			}
		}
		if u.name == "bob" {
			assert.Equal(t, 1, refused, "bob's source learnt of the expiry from U's 401")
		} else {
			assert.Zero(t, refused, "alice's source exchanged before sending the expired token")
		}
	}

	// No token value in the logs.
	logs := w.logs.String()
	require.Contains(t, logs, "access token obtained", "the logs were captured")
	var secrets []string
	for _, u := range users {
		secrets = append(secrets, u.subj.given()...)
		entries, err := u.store.List(context.Background())
		require.NoError(t, err)
		for _, e := range entries {
			if e.Token != nil {
				secrets = append(secrets, e.Token.AccessToken, e.Token.RefreshToken)
			}
		}
	}
	for _, r := range w.u.Requests() {
		secrets = append(secrets, r.Bearer)
	}
	for _, s := range secrets {
		if len(s) > 8 {
			assert.NotContains(t, logs, s)
		}
	}
}

// A subject token for another audience and an expired one are refused
// with ErrSubjectTokenRejected (the server's code inside, no token in the
// message), and not presented again; the caller's next token is. An
// opaque subject token is exchanged too. A client other than
// mcpvisor-gateway may not exchange (unauthorized_client); without a
// subject token nothing is asked.
func TestTokenExchangeRefusedWithOIDCProvider(t *testing.T) {
	const ttl = 2
	w := newExchangeWorld(t, ttl)

	var current atomic.Value // the subject token the caller holds now
	subj := &subjects{next: func(context.Context) (string, error) { return current.Load().(string), nil }}
	src, reqs := w.exchanger(t, "mcpvisor-gateway", subj, nil)

	refused := func(what, token string) {
		t.Helper()
		_, err := initialize(t, src, w.u.Resource())
		require.Error(t, err, what)
		assert.ErrorIs(t, err, oauth.ErrSubjectTokenRejected, what)
		assert.NotErrorIs(t, err, oauth.ErrNeedsLogin, "%s: no login helps", what)
		var oe *oauth.Error
		require.ErrorAs(t, err, &oe, what)
		assert.Equal(t, "invalid_grant", oe.Code, what)
		assert.NotContains(t, err.Error(), token, what)
		assert.NotContains(t, src.Status().LastError, token, what)
		assert.Contains(t, src.Status().LastError, "invalid_grant", what)
	}

	// A token for U: the provider issued it, but not for G.
	forU := oauthtest.OIDCClientToken(t, w.issuer, "cc-user", w.u.Resource(), "mcp:tools")
	current.Store(forU)
	refused("another audience", forU)
	n := len(reqs.all())
	refused("the same token again", forU)
	assert.Len(t, reqs.all(), n, "a refused subject token is not presented again")

	// A token for G exchanges, with its sub (the client's own here).
	forG := oauthtest.OIDCClientToken(t, w.issuer, "cc-user", w.g.Resource(), "mcp:tools")
	current.Store(forG)
	status, err := initialize(t, src, w.u.Resource())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	_, claims := lastValid(t, w.u)
	assert.Equal(t, "cc-user", claims["sub"])

	// Expired: both the U token and the subject token.
	time.Sleep(ttl * time.Second) // testwait:ok not a wait: the tokens must expire
	refused("an expired subject token", forG)

	// The caller refreshed: the new token is exchanged.
	current.Store(oauthtest.OIDCClientToken(t, w.issuer, "cc-user", w.g.Resource(), "mcp:tools"))
	status, err = initialize(t, src, w.u.Resource())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)

	// An opaque subject token (looked up, not verified as a JWT).
	oauthtest.ConfigureOIDCProvider(t, w.issuer, url.Values{"format": {"opaque"}})
	opaque := oauthtest.OIDCClientToken(t, w.issuer, "cc-admin", w.g.Resource(), "mcp:tools")
	oauthtest.ConfigureOIDCProvider(t, w.issuer, url.Values{"format": {"jwt"}})
	require.NotContains(t, opaque, ".")
	fromOpaque, _ := w.exchanger(t, "mcpvisor-gateway", &subjects{next: func(context.Context) (string, error) { return opaque, nil }}, nil)
	status, err = initialize(t, fromOpaque, w.u.Resource())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	_, claims = lastValid(t, w.u)
	assert.Equal(t, "cc-admin", claims["sub"])

	// Only mcpvisor-gateway may exchange.
	other, _ := w.exchanger(t, "cc-admin", &subjects{next: func(context.Context) (string, error) {
		return oauthtest.OIDCClientToken(t, w.issuer, "cc-user", w.g.Resource(), "mcp:tools"), nil
	}}, nil)
	_, err = initialize(t, other, w.u.Resource())
	assert.ErrorIs(t, err, oauth.ErrSubjectTokenRejected)
	var oe *oauth.Error
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "unauthorized_client", oe.Code)

	// No subject token: a typed error, and the server is not asked.
	none, noneReqs := w.exchanger(t, "mcpvisor-gateway", &subjects{next: func(context.Context) (string, error) { return "", nil }}, nil)
	_, err = initialize(t, none, w.u.Resource())
	assert.ErrorIs(t, err, oauth.ErrNoSubjectToken)
	assert.Empty(t, noneReqs.all())
	failing, _ := w.exchanger(t, "mcpvisor-gateway", &subjects{next: func(context.Context) (string, error) {
		return "", errors.New("the caller's session ended")
	}}, nil)
	_, err = initialize(t, failing, w.u.Resource())
	assert.ErrorIs(t, err, oauth.ErrNoSubjectToken)
	assert.ErrorContains(t, err, "the caller's session ended")
}

// syncBuffer is a bytes.Buffer safe for the logger and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
