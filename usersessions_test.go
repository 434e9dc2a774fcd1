package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// TestPrincipalSessions: the principals' own sessions with a server
// whose credentials are per user, against the mock behind a resource
// server that takes node-oidc-provider's JWTs ("exchange" credentials:
// each principal's token for a resource of its own is exchanged, RFC
// 8693, no browser).
//   - each principal's calls go with a token bearing its own subject;
//   - beyond MaxUserSessions the least recently used session is closed,
//     and one unused for UserSessionIdle is closed too;
//   - a config change closes them all;
//   - a request without a principal takes the server's one connection
//     (which has no token here: needs-auth);
//   - a principal without an access token is refused ErrNoSubjectToken;
//   - a per-user server without UserRedirectURL refuses a principal with
//     ErrNoUserRedirect;
//   - Close leaves no goroutine behind (TestMain's check).
func TestPrincipalSessions(t *testing.T) {
	mock := serveMock(t, mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}})
	mu, err := url.Parse(mock.URL)
	require.NoError(t, err)
	rs, err := oauthtest.NewResourceServer("http://"+mu.Host, "mcp:tools")
	require.NoError(t, err)
	t.Cleanup(rs.Close)
	const callers = "http://127.0.0.1:1/callers" // the resource the principals' own tokens are for
	issuer := oauthtest.StartOIDCProvider(t, ".", callers+" "+rs.Resource(), 60)
	rs.SetIssuer(issuer)

	opts := testOptions
	opts.OAuth = OAuthOptions{MaxUserSessions: 2, UserSessionIdle: 400 * time.Millisecond}
	s := start(t, opts)
	exchange := json.RawMessage(`{"credentials":"exchange","clientId":"mcpvisor-gateway","clientSecret":"mcpvisor-gateway-secret"}`)
	cfg := ServerConfig{Config: transports.Config{Type: transports.TypeHTTP, URL: rs.Resource()}, OAuth: exchange}
	setAndSettle(t, s, map[string]ServerConfig{"x": cfg, "p": {Config: cfg.Config, OAuth: json.RawMessage(`{"credentials":"per-user"}`)}})
	require.Equal(t, StateNeedsAuth, statusOf(s, "x").State)
	h, err := s.handle("x")
	require.NoError(t, err)

	principal := func(client string) Principal {
		tok := oauthtest.OIDCClientToken(t, issuer, client, callers, "mcp:tools")
		return Principal{ID: issuer + " " + client, AccessToken: func() string { return tok }}
	}
	callAs := func(p *Principal, server string) error {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Patience)
		defer cancel()
		if p != nil {
			ctx = WithPrincipal(ctx, *p)
		}
		_, err := s.CallTool(ctx, "mcp__"+server+"__echo", map[string]any{"text": "hi"})
		return err
	}
	lastSubject := func() string {
		reqs := rs.Requests()
		for i := len(reqs) - 1; i >= 0; i-- {
			if reqs[i].Bearer != "" && reqs[i].Valid {
				c, err := oauthtest.JWTClaims(reqs[i].Bearer)
				require.NoError(t, err)
				return c["sub"].(string)
			}
		}
		return ""
	}

	ps := []Principal{principal("cc-user"), principal("cc-admin"), principal("mcpvisor-gateway")}
	for _, p := range ps {
		require.NoError(t, callAs(&p, "x"))
		c, err := oauthtest.JWTClaims(p.AccessToken())
		require.NoError(t, err)
		assert.Equal(t, c["sub"], lastSubject(), "the upstream saw the principal's own subject")
		assert.LessOrEqual(t, h.users.open(), 2, "MaxUserSessions")
	}
	assert.Eventually(t, func() bool { return h.users.open() == 0 }, testwait.Patience, 50*time.Millisecond,
		"sessions unused for UserSessionIdle are closed")

	// A config change closes them (a supervisor whose sessions stay
	// open while idle, so that only the change can have closed them).
	opts.OAuth.UserSessionIdle = time.Hour
	s2 := start(t, opts)
	setAndSettle(t, s2, map[string]ServerConfig{"x": cfg})
	h2, err := s2.handle("x")
	require.NoError(t, err)
	_, err = s2.CallTool(WithPrincipal(testwait.Context(t), ps[0]), "mcp__x__echo", map[string]any{"text": "hi"})
	require.NoError(t, err)
	require.Equal(t, 1, h2.users.open())
	changed := cfg
	changed.Headers = map[string]string{"X-Changed": "1"}
	setAndSettle(t, s2, map[string]ServerConfig{"x": changed})
	assert.Equal(t, 0, h2.users.open(), "a config change closes the principals' sessions")
	_, err = s2.CallTool(WithPrincipal(testwait.Context(t), ps[0]), "mcp__x__echo", map[string]any{"text": "hi"})
	require.NoError(t, err, "and the next call opens one with the new config")

	var nr *NotReadyError
	require.ErrorAs(t, callAs(nil, "x"), &nr, "no principal: the server's one connection")
	assert.Equal(t, StateNeedsAuth, nr.State)
	assert.ErrorIs(t, callAs(&Principal{ID: "nobody"}, "x"), ErrNoSubjectToken)
	assert.ErrorIs(t, callAs(&ps[1], "p"), ErrNoUserRedirect)
	assert.False(t, errors.Is(callAs(&ps[1], "x"), ErrNoSubjectToken))
}
