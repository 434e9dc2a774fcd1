package mcpvisor

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
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

// syncBuffer is a log sink safe for concurrent writes.
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

// protectedMock serves a mock MCP server behind the test authorization
// server, and returns the URL to configure.
func protectedMock(t *testing.T, o mockserver.Options, expiresIn int) (*oauthtest.Server, string) {
	t.Helper()
	srv := serveMock(t, o)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	origin := "http://" + u.Host
	as, err := oauthtest.New(origin, expiresIn)
	require.NoError(t, err)
	t.Cleanup(as.Close)
	front, _ := url.Parse(as.URL)
	front.Scheme, front.Path = u.Scheme, u.Path
	return as, front.String()
}

func authOptions(log *syncBuffer, ua bool) Options {
	opts := testOptions
	opts.Logger = zerolog.New(log).Level(zerolog.DebugLevel)
	if ua {
		opts.OAuth.UserAgent = func(string) oauth.UserAgent { return &oauth.HeadlessUserAgent{} }
	}
	return opts
}

// mcpRequests are the requests that reached (or tried to reach) the MCP
// server, not the authorization server.
func mcpRequests(as *oauthtest.Server) []oauthtest.Request {
	var out []oauthtest.Request
	for _, r := range as.Requests() {
		if !strings.HasPrefix(r.Path, "/.well-known/") && !strings.HasPrefix(r.Path, "/as/") {
			out = append(out, r)
		}
	}
	return out
}

func assertNoTokensIn(t *testing.T, logs string, as *oauthtest.Server) {
	t.Helper()
	tokens := as.Tokens()
	require.NotEmpty(t, tokens)
	for _, tok := range tokens {
		assert.NotContains(t, logs, tok, "a token in the logs")
	}
}

// Every HTTP request of every remote transport carries the bearer token
// once there is one: POSTs, the GET stream, the WebSocket handshake, the
// DELETE at close, and the requests of a reconnect.
func TestOAuthBearerOnEveryRequest(t *testing.T) {
	for _, tc := range []struct {
		name      string
		transport string
		kind      transports.Type
		versions  []string
	}{
		{"http-session", mockserver.TransportHTTP, transports.TypeHTTP, []string{protocol.Version20251125}},
		{"http-stateless", mockserver.TransportHTTP, transports.TypeHTTP, nil},
		{"sse", mockserver.TransportSSE, transports.TypeSSE, []string{protocol.Version20241105}},
		{"ws", mockserver.TransportWS, transports.TypeWS, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as, u := protectedMock(t, mockserver.Options{Transport: tc.transport, Versions: tc.versions}, 3600)
			var logs syncBuffer
			s := start(t, authOptions(&logs, true))
			setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(tc.kind, u)})
			require.Equal(t, StateReady, statusOf(s, "r").State, statusOf(s, "r").LastError)
			res, err := call(t, s, "mcp__r__echo", "hi")
			require.NoError(t, err)
			assert.Equal(t, "hi", res.Content[0].Text)
			require.NoError(t, s.Server("r").Reconnect(t.Context()))
			require.NoError(t, s.WaitSettled(t.Context()))
			_, err = call(t, s, "mcp__r__echo", "again")
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, s.Close(ctx))

			reqs := mcpRequests(as)
			require.NotEmpty(t, reqs)
			assert.Empty(t, reqs[0].Bearer, "the first request goes without a token, and gets the challenge")
			methods := map[string]bool{}
			for i, r := range reqs[1:] {
				assert.True(t, r.Valid, "request %d (%s %s) without a valid bearer", i+1, r.Method, r.Path)
				methods[r.Method] = true
			}
			assert.True(t, methods["GET"] || methods["POST"])
			if tc.name == "http-session" {
				assert.True(t, methods["DELETE"], "the session's DELETE carries the token")
				assert.True(t, methods["GET"], "the GET stream carries the token")
			}
			st := statusOf(s, "r")
			require.NotNil(t, st.Auth)
			assert.Equal(t, as.Issuer(), st.Auth.Issuer)
			assertNoTokensIn(t, logs.String(), as)
		})
	}
}

// Without a user agent, a server that needs authorization parks in
// needs-auth with the scope it asked for and an EventAuthRequired, costs
// nothing while parked, and is ready after Login. An expired access token
// is refreshed once (with the resource parameter) and the call retried; a
// revoked grant parks the server again.
func TestOAuthNeedsAuthLoginRefreshRevoke(t *testing.T) {
	as, u := protectedMock(t, mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}}, 3600)
	as.SetScopes("mcp:read")
	var logs syncBuffer
	s := start(t, authOptions(&logs, false))
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, u)})
	st := statusOf(s, "r")
	require.Equal(t, StateNeedsAuth, st.State)
	require.NotNil(t, st.Auth)
	assert.Equal(t, "mcp:read", st.Auth.NeedScope)
	var ev eventRecord
	require.Eventually(t, func() bool {
		for {
			select {
			case ev = <-events:
				if ev.Type == EventAuthRequired {
					return true
				}
			default:
				return false
			}
		}
	}, 5*time.Second, 10*time.Millisecond)
	var data struct{ Scope string }
	require.NoError(t, json.Unmarshal(ev.Data, &data))
	assert.Equal(t, "mcp:read", data.Scope)
	assert.Equal(t, "r", ev.Server)

	before := len(as.Requests())
	time.Sleep(300 * time.Millisecond) // testwait:ok a check that nothing happens within a while
	assert.Equal(t, before, len(as.Requests()), "a parked server costs its server and authorization server nothing")

	require.NoError(t, s.Server("r").Login(t.Context(), &oauth.HeadlessUserAgent{}))
	require.NoError(t, s.WaitSettled(t.Context()))
	require.Equal(t, StateReady, statusOf(s, "r").State)
	_, err := call(t, s, "mcp__r__echo", "x")
	require.NoError(t, err)

	// The access token dies early: one refresh, one retry.
	as.ExpireAccess()
	_, err = call(t, s, "mcp__r__echo", "y")
	require.NoError(t, err)
	forms := as.TokenRequests()
	last := forms[len(forms)-1]
	assert.Equal(t, []string{"refresh_token"}, last["grant_type"])
	assert.Equal(t, []string{u}, last["resource"])
	assert.Equal(t, StateReady, statusOf(s, "r").State)

	// The grant is revoked: the call fails, the server parks.
	as.RevokeAll()
	_, err = call(t, s, "mcp__r__echo", "z")
	require.Error(t, err)
	assert.Equal(t, FailureAuth, ClassifyFailure(err))
	require.NoError(t, s.Server("r").Reconnect(t.Context()))
	require.Eventually(t, func() bool { return statusOf(s, "r").State == StateNeedsAuth }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, s.Server("r").Login(t.Context(), &oauth.HeadlessUserAgent{}))
	require.NoError(t, s.WaitSettled(t.Context()))
	_, err = call(t, s, "mcp__r__echo", "back")
	require.NoError(t, err)
	assert.Zero(t, as.Reuse())
	assertNoTokensIn(t, logs.String(), as)
}

// Login without a user agent runs the loopback redirect and shows the URL
// through the host's OAuthOptions.OpenURL hook (here: a "browser" that
// follows it).
func TestOAuthLoginThroughHostHook(t *testing.T) {
	as, u := protectedMock(t, mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}}, 3600)
	var logs syncBuffer
	opts := authOptions(&logs, false)
	var shown []string
	var mu sync.Mutex
	opts.OAuth.OpenURL = func(ctx context.Context, server, authURL string) error {
		mu.Lock()
		shown = append(shown, server)
		mu.Unlock()
		go func() { // the user's browser, following the redirects to the loopback listener
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
			if resp, err := (&http.Client{Timeout: testwait.Patience}).Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		return nil
	}
	s := start(t, opts)
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, u)})
	require.Equal(t, StateNeedsAuth, statusOf(s, "r").State)
	require.NoError(t, s.Server("r").Login(t.Context(), nil))
	require.NoError(t, s.WaitSettled(t.Context()))
	assert.Equal(t, StateReady, statusOf(s, "r").State)
	assert.Equal(t, []string{"r"}, shown)
	_, err := call(t, s, "mcp__r__echo", "x")
	require.NoError(t, err)
	assertNoTokensIn(t, logs.String(), as)
}

// A server without OAuth settings gets its token source only when it
// needs one: never, for a server that never asks for authorization; on
// its first request, when the store holds credentials for its URL (they
// go with every request, the first included); on its first challenge
// otherwise (TestOAuthBearerOnEveryRequest).
func TestOAuthSourceOnlyWhenNeeded(t *testing.T) {
	open := serveMock(t, mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}})
	as, u := protectedMock(t, mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}}, 3600)
	store := &oauth.MemoryStore{}

	var logs syncBuffer
	opts := authOptions(&logs, true)
	opts.OAuth.Store = store
	s := start(t, opts)
	setAndSettle(t, s, map[string]ServerConfig{"open": remoteServer(transports.TypeHTTP, open.URL), "r": remoteServer(transports.TypeHTTP, u)})
	require.Equal(t, StateReady, statusOf(s, "open").State, statusOf(s, "open").LastError)
	require.Equal(t, StateReady, statusOf(s, "r").State, statusOf(s, "r").LastError)
	h, err := s.handle("open")
	require.NoError(t, err)
	assert.Nil(t, h.currentAuth(), "a server that never asked for authorization has no source")
	assert.Nil(t, statusOf(s, "open").Auth)
	h, err = s.handle("r")
	require.NoError(t, err)
	assert.NotNil(t, h.currentAuth(), "the challenge created it")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Close(ctx))

	// A new supervisor, without a user agent: the credentials in the
	// store go with its first request.
	before := len(mcpRequests(as))
	opts = authOptions(&logs, false)
	opts.OAuth.Store = store
	s = start(t, opts)
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, u)})
	require.Equal(t, StateReady, statusOf(s, "r").State, statusOf(s, "r").LastError)
	reqs := mcpRequests(as)[before:]
	require.NotEmpty(t, reqs)
	for i, r := range reqs {
		assert.True(t, r.Valid, "request %d (%s %s) without a valid bearer", i, r.Method, r.Path)
	}
	st := statusOf(s, "r")
	require.NotNil(t, st.Auth)
	assert.True(t, st.Auth.Authorized)
	assertNoTokensIn(t, logs.String(), as)
}
