package gateway_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/audit"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/authn"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// protectedMock is the project's mock server over HTTP behind a resource
// server that takes the issuer's JWTs for its own resource only.
func protectedMock(t *testing.T) *oauthtest.ResourceServer {
	t.Helper()
	mock, err := mockserver.Serve(context.Background(), mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mock.Close() })
	mu, err := url.Parse(mock.URL)
	require.NoError(t, err)
	rs, err := oauthtest.NewResourceServer("http://"+mu.Host, "mcp:tools")
	require.NoError(t, err)
	t.Cleanup(rs.Close)
	return rs
}

// jwtSubject is the sub claim of a JWT (unverified: the resource server
// verified it).
func jwtSubject(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	require.Len(t, parts, 3, "a JWT")
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var c struct {
		Sub string `json:"sub"`
	}
	require.NoError(t, json.Unmarshal(b, &c))
	return c.Sub
}

// subjectsSince returns the subjects of the bearer tokens the resource
// server received from request number from on, and the count so far.
func subjectsSince(t *testing.T, rs *oauthtest.ResourceServer, from int) (map[string]int, int) {
	t.Helper()
	reqs := rs.Requests()
	subs := map[string]int{}
	for _, r := range reqs[from:] {
		if r.Bearer != "" && r.Valid {
			subs[jwtSubject(t, r.Bearer)]++
		}
	}
	return subs, len(reqs)
}

// elicitationURL is the URL of a CodeURLElicitationRequired error.
func elicitationURL(t *testing.T, a statelessAnswer) string {
	t.Helper()
	require.NotNil(t, a.msg.Error, "an error asking for authorization")
	require.Equal(t, int64(gateway.CodeURLElicitationRequired), a.msg.Error.Code, a.msg.Error.Message)
	var data struct {
		Elicitations []struct {
			Mode, ElicitationID, URL string
		} `json:"elicitations"`
	}
	require.NoError(t, json.Unmarshal(a.msg.Error.Data, &data))
	require.Len(t, data.Elicitations, 1)
	e := data.Elicitations[0]
	assert.Equal(t, "url", e.Mode)
	assert.NotEmpty(t, e.ElicitationID)
	assert.Contains(t, a.msg.Error.Message, e.URL, "clients that show only the message show the URL")
	return e.URL
}

var hiddenInput = regexp.MustCompile(`name="(flow|confirm)" value="([^"]*)"`)

// browse is a user's browser completing an authorization: it opens the
// gateway's confirmation page at pageURL, checks it names who, presses
// its button, and follows the redirects through the authorization server
// (which logs in the account the test set) back to the gateway's
// callback. It returns the final page's status and text.
func browse(t *testing.T, pageURL, who string) (int, string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, Timeout: testwait.Patience}
	resp, err := browser.Get(pageURL)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(page))
	assert.Contains(t, string(page), who, "the page names whom the authorization is for")
	assert.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
	form := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(string(page), -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	require.NotEmpty(t, form.Get("flow"))
	require.NotEmpty(t, form.Get("confirm"))
	resp, err = browser.PostForm(pageURL[:strings.Index(pageURL, "?")], form)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(body)
}

// setAccount names the account the test authorization server logs in.
func setAccount(t *testing.T, issuer, account string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: testwait.Patience}).Post(issuer+"/test/config?account="+url.QueryEscape(account), "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestGatewayPerUserUpstreamCredentials: two callers of the gateway
// (client-credentials tokens of node-oidc-provider for cc-user and
// cc-admin) use an upstream server, itself protected by the same
// authorization server, with their own accounts there.
//   - "mail" has per-user credentials: the gateway holds no token of its
//     own for it (its one connection needs authorization). Each caller's
//     first call gets a URL elicitation (-32042) to the gateway's
//     confirmation page; the caller's browser confirms, logs in at the
//     authorization server as its own upstream account, and comes back
//     to the callback; the caller's calls then reach mail with its own
//     token only (the upstream sees each caller's account on its calls
//     and never another's), the pool offers mail's tools, and the token
//     store keeps each caller's tokens under the caller.
//   - "ledger" has exchange credentials: each caller's token is exchanged
//     (RFC 8693) for one ledger accepts, with the caller's subject,
//     without a browser.
//   - A callback the browser did not start from the page is refused, and
//     so is a confirmation without the page's cookie.
func TestGatewayPerUserUpstreamCredentials(t *testing.T) {
	ln, resource := loopbackListener(t)
	mail, ledger := protectedMock(t), protectedMock(t)
	issuer := oauthtest.StartOIDCProvider(t, "..", resource+" "+mail.Resource()+" "+ledger.Resource(), 60)
	mail.SetIssuer(issuer)
	ledger.SetIssuer(issuer)

	redirect, confirm, err := gateway.UserAuthorizationURLs(resource)
	require.NoError(t, err)
	storePath := filepath.Join(t.TempDir(), "tokens.json")
	logs := &lockedWriter{b: &strings.Builder{}}
	logger := zerolog.New(logs).Level(zerolog.DebugLevel)
	sup, err := mcpvisor.Start(context.Background(), mcpvisor.Options{Logger: logger, OAuth: mcpvisor.OAuthOptions{
		Store: &oauth.FileStore{Path: storePath}, UserRedirectURL: redirect, UserConfirmURL: confirm,
	}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sup.Close(testwait.Context(t))) })
	_, err = sup.SetServers(testwait.Context(t), map[string]mcpvisor.ServerConfig{
		"mail": {Config: transports.Config{Type: transports.TypeHTTP, URL: mail.Resource()}, OAuth: json.RawMessage(`{"credentials":"per-user"}`)},
		"ledger": {Config: transports.Config{Type: transports.TypeHTTP, URL: ledger.Resource()},
			OAuth: json.RawMessage(`{"credentials":"exchange","clientId":"mcpvisor-gateway","clientSecret":"mcpvisor-gateway-secret"}`)},
	}, mcpvisor.AwaitSettled(testwait.Patience))
	require.NoError(t, err)
	st, err := sup.Server("mail").Status()
	require.NoError(t, err)
	require.Equal(t, mcpvisor.StateNeedsAuth, st.State, "the gateway has no token of its own for mail")

	v, err := authn.New(authn.Options{Issuer: issuer, Audience: resource})
	require.NoError(t, err)
	rs := &gateway.ResourceServer{Validator: v, Resource: resource, AuthorizationServers: []string{issuer}, Scopes: []string{"mcp:tools"}}
	w, trailPath := trail(t, audit.Options{})
	serveOn(t, sup, gateway.Options{ResourceServer: rs, Audit: w}, ln)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})

	alice := ccToken(t, issuer, "cc-user", resource, "mcp:tools")
	bob := ccToken(t, issuer, "cc-admin", resource, "mcp:tools")
	echo := func(token, tool, text string) statelessAnswer {
		return postStateless(t, resource, token, "tools/call", `{"name":"`+tool+`","arguments":{"text":"`+text+`"}}`)
	}
	echoed := func(a statelessAnswer) string {
		t.Helper()
		require.Nil(t, a.msg.Error, "%+v", a.msg.Error)
		var res protocol.CallToolResult
		require.NoError(t, json.Unmarshal(a.msg.Result, &res))
		require.False(t, res.IsError)
		require.NotEmpty(t, res.Content)
		return res.Content[0].Text
	}

	// Each caller authorizes mail once, as its own upstream account.
	seen := 0
	for _, tc := range []struct{ token, caller, account string }{
		{alice, "cc-user", "alice-upstream"}, {bob, "cc-admin", "bob-upstream"},
	} {
		page := elicitationURL(t, echo(tc.token, "mail__echo", "before"))
		require.True(t, strings.HasPrefix(page, confirm+"?flow="), page)
		again := elicitationURL(t, echo(tc.token, "mail__echo", "again"))
		assert.Equal(t, page, again, "a pending authorization is offered again, not a new one")
		setAccount(t, issuer, tc.account)
		status, text := browse(t, page, tc.caller)
		require.Equal(t, http.StatusOK, status, text)
		assert.Contains(t, text, "Authorized")
		assert.Equal(t, "from "+tc.account, echoed(echo(tc.token, "mail__echo", "from "+tc.account)))
		var subs map[string]int
		subs, seen = subjectsSince(t, mail, seen)
		assert.Equal(t, []string{tc.account}, keys(subs), "mail saw only this caller's account since its authorization")
	}
	for range 2 { // and again, alternating: each call on its caller's own session
		for _, tc := range []struct{ token, account string }{{alice, "alice-upstream"}, {bob, "bob-upstream"}} {
			assert.Equal(t, tc.account, echoed(echo(tc.token, "mail__echo", tc.account)))
			var subs map[string]int
			subs, seen = subjectsSince(t, mail, seen)
			assert.Equal(t, []string{tc.account}, keys(subs))
		}
	}
	assert.Contains(t, listedNames(t, postStateless(t, resource, alice, "tools/list", "")), "mail__echo",
		"the pool offers mail's tools as a caller's session listed them")

	// The store keeps each caller's tokens under the caller, none for
	// the gateway itself.
	entries, err := (&oauth.FileStore{Path: storePath}).List(context.Background())
	require.NoError(t, err)
	var keyed []string
	for _, e := range entries {
		keyed = append(keyed, e.ServerURL)
	}
	assert.Len(t, keyed, 2)
	for _, k := range keyed {
		assert.True(t, strings.HasPrefix(k, mail.Resource()+"#principal="), k)
	}

	// Exchange: no browser, the caller's own subject upstream.
	for _, tc := range []struct{ token, caller string }{{alice, "cc-user"}, {bob, "cc-admin"}} {
		before := len(ledger.Requests())
		assert.Equal(t, "x", echoed(echo(tc.token, "ledger__echo", "x")))
		subs, _ := subjectsSince(t, ledger, before)
		assert.Equal(t, []string{jwtSubject(t, tc.token)}, keys(subs), "ledger saw the caller's own subject")
	}

	// A callback no browser started from the page is refused.
	page := elicitationURL(t, echo(ccToken(t, issuer, "mcpvisor-gateway", resource, "mcp:tools"), "mail__echo", "x"))
	quick := &http.Client{Timeout: testwait.Patience}
	resp, err := quick.Get(strings.Replace(page, gateway.UserAuthorizePath, gateway.UserCallbackPath, 1) + "&state=forged&code=forged")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	// A confirmation without the page's cookie is refused.
	flow := strings.TrimPrefix(page, confirm+"?flow=")
	resp, err = quick.PostForm(confirm, url.Values{"flow": {flow}, "confirm": {"guessed"}})
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	// The official TypeScript SDK's client, for a third caller, gets the
	// same request to open the page as its UrlElicitationRequiredError,
	// and its call goes through once its user authorized.
	carol := ccToken(t, issuer, "mcpvisor-gateway", resource, "mcp:tools")
	out := runNode(t, tsModules(t), "peruser.mjs", resource, carol, "mail__echo", "from carol")
	assert.Contains(t, out, "ELICIT url "+flow+" "+page, out)
	setAccount(t, issuer, "carol-upstream")
	status, text := browse(t, page, "mcpvisor-gateway")
	require.Equal(t, http.StatusOK, status, text)
	out = runNode(t, tsModules(t), "peruser.mjs", resource, carol, "mail__echo", "from carol")
	assert.Contains(t, out, "RESULT from carol", out)
	subs, _ := subjectsSince(t, mail, seen)
	assert.Equal(t, []string{"carol-upstream"}, keys(subs))

	// No token, code or flow in the logs.
	for _, secret := range []string{alice, bob, carol, flow} {
		assert.NotContains(t, logs.String(), secret)
	}
	data, err := os.ReadFile(storePath)
	require.NoError(t, err)
	assert.NotContains(t, string(data), alice, "the callers' own tokens are not stored")

	// The trail has each caller's authorization, and the refusals.
	var authorized []string
	refused := 0
	for _, l := range closeTrail(t, w, trailPath) {
		switch {
		case l.Op == "authorize" && l.Outcome == audit.OutcomeOK:
			assert.Equal(t, "mail", l.Server)
			authorized = append(authorized, l.Subject)
		case l.Action == audit.ActionRefused:
			refused++
		}
	}
	assert.ElementsMatch(t, []string{jwtSubject(t, alice), jwtSubject(t, bob), jwtSubject(t, carol)}, authorized)
	assert.Equal(t, 2, refused, "the forged callback and the confirmation without the cookie")
}

func keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// lockedWriter is a strings.Builder the logger's goroutines may write to
// while the test reads it.
type lockedWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
