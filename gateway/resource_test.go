package gateway_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/authn"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// serveOn runs a gateway over sup behind an HTTP server on ln.
func serveOn(t *testing.T, sup gateway.Backend, opts gateway.Options, ln net.Listener) *httptest.Server {
	t.Helper()
	g := gateway.New(sup, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(ctx, 5*time.Millisecond)
	}()
	srv := httptest.NewUnstartedServer(g.Handler())
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() {
		g.Close()
		srv.Close()
		cancel()
		testwait.Done(t, done, "the gateway's Run to return")
	})
	return srv
}

// loopbackListener listens on a loopback port and returns the MCP
// endpoint's URL there (the gateway's resource URI).
func loopbackListener(t *testing.T) (net.Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln, "http://" + ln.Addr().String() + gateway.MCPPath
}

// ccToken gets an access token for resource from the test provider's
// client credentials grant.
func ccToken(t *testing.T, issuer, client, resource, scope string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {resource}}
	if scope != "" {
		form.Set("scope", scope)
	}
	req, err := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(client, client+"-secret")
	resp, err := (&http.Client{Timeout: testwait.Patience}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&tok))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return tok.AccessToken
}

// request sends method path with the bearer token (none when empty) and
// returns the status and WWW-Authenticate.
func request(t *testing.T, method, u, token string) (int, string) {
	t.Helper()
	var body *strings.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(method, u, body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: testwait.Patience}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// The gateway as an OAuth resource server, with a real authorization
// server (node-oidc-provider) issuing JWT access tokens for it: the
// protected resource metadata; no token → 401 naming the metadata; a
// valid token is admitted and its caller's Identity reaches a tool's
// handler; an expired token, or one for another resource, → 401
// invalid_token; the admin API needs the admin scope (403
// insufficient_scope), the MCP endpoint the base scope; the static token
// still admits.
func TestGatewayResourceServer(t *testing.T) {
	ln, resource := loopbackListener(t)
	issuer := oauthtest.StartOIDCProvider(t, "..", resource, 60, "OIDC_SCOPES=mcp:tools mcpvisor:admin", "OIDC_KEYS=1")
	var offset atomic.Int64 // the validator's clock runs this far ahead
	v, err := authn.New(authn.Options{Issuer: issuer, Audience: resource,
		Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
	require.NoError(t, err)

	var f gateway.Features
	require.NoError(t, f.AddTool(gateway.Tool{
		Definition: protocol.Tool{Name: "whoami"},
		Handler: func(ctx context.Context, _ json.RawMessage) (*protocol.CallToolResult, error) {
			id, ok := gateway.IdentityFrom(ctx)
			if !ok {
				return textResult("nobody"), nil
			}
			b, _ := json.Marshal(id)
			return textResult(string(b)), nil
		},
	}))
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	rs := &gateway.ResourceServer{Validator: v, Resource: resource, AuthorizationServers: []string{issuer},
		Scopes: []string{"mcp:tools"}}
	srv := serveOn(t, sup, gateway.Options{Features: &f, ResourceServer: rs, Token: "the-static-token"}, ln)
	metadataURL := srv.URL + "/.well-known/oauth-protected-resource/mcp"

	t.Run("metadata", func(t *testing.T) {
		for _, u := range []string{metadataURL, srv.URL + "/.well-known/oauth-protected-resource"} {
			resp, err := (&http.Client{Timeout: testwait.Patience}).Get(u)
			require.NoError(t, err)
			var md map[string]any
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&md))
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, map[string]any{
				"resource":                 resource,
				"authorization_servers":    []any{issuer},
				"scopes_supported":         []any{"mcp:tools", "mcpvisor:admin"},
				"bearer_methods_supported": []any{"header"},
			}, md)
		}
	})
	t.Run("no token", func(t *testing.T) {
		status, challenge := request(t, http.MethodPost, resource, "")
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Equal(t, `Bearer resource_metadata="`+metadataURL+`", scope="mcp:tools"`, challenge)
	})

	user := ccToken(t, issuer, "cc-user", resource, "mcp:tools")
	admin := ccToken(t, issuer, "cc-admin", resource, "mcp:tools mcpvisor:admin")
	t.Run("identity reaches the handler", func(t *testing.T) {
		host := upstream(t, map[string]mcpvisor.ServerConfig{"gw": {Config: transports.Config{Type: "http", URL: resource,
			Headers: map[string]string{"Authorization": "Bearer " + user}}}})
		require.Equal(t, mcpvisor.StateReady, host.Status()[0].State, host.Status()[0].LastError)
		assert.Contains(t, names(host.Tools()), "mcp__gw__a__echo")
		res, err := host.CallTool(testwait.Context(t), "mcp__gw__whoami", nil)
		require.NoError(t, err)
		require.Len(t, res.Content, 1)
		var id gateway.Identity
		require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &id), res.Content[0].Text)
		assert.Equal(t, gateway.Identity{Issuer: issuer, Subject: "cc-user", ClientID: "cc-user", Groups: []string{"team-cc-user"},
			Roles: []string{"role-cc-user"}, Scopes: []string{"mcp:tools"}}, id)
	})
	t.Run("expired", func(t *testing.T) {
		offset.Store(int64(2 * time.Hour))
		defer offset.Store(0)
		status, challenge := request(t, http.MethodPost, resource, user)
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Contains(t, challenge, `Bearer resource_metadata="`+metadataURL+`", error="invalid_token"`)
		assert.Contains(t, challenge, `error_description="authn: token expired"`)
	})
	t.Run("another resource's token", func(t *testing.T) {
		// A second gateway, its own resource: the first one's token is
		// not for it.
		ln2, resource2 := loopbackListener(t)
		v2, err := authn.New(authn.Options{Issuer: issuer, Audience: resource2})
		require.NoError(t, err)
		serveOn(t, sup, gateway.Options{ResourceServer: &gateway.ResourceServer{Validator: v2, Resource: resource2,
			AuthorizationServers: []string{issuer}}}, ln2)
		status, challenge := request(t, http.MethodPost, resource2, user)
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Contains(t, challenge, `error="invalid_token"`)
		assert.Contains(t, challenge, "wrong audience")
		status, _ = request(t, http.MethodPost, resource, user)
		assert.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, status, "the same token at its own resource")
	})
	t.Run("scopes", func(t *testing.T) {
		status, challenge := request(t, http.MethodGet, srv.URL+"/status", user)
		assert.Equal(t, http.StatusForbidden, status)
		assert.Equal(t, `Bearer resource_metadata="`+metadataURL+`", error="insufficient_scope", scope="mcp:tools mcpvisor:admin"`, challenge)
		status, _ = request(t, http.MethodGet, srv.URL+"/status", admin)
		assert.Equal(t, http.StatusOK, status)
		status, challenge = request(t, http.MethodGet, srv.URL+"/status", "")
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Contains(t, challenge, "resource_metadata=")

		none := ccToken(t, issuer, "cc-user", resource, "")
		status, challenge = request(t, http.MethodPost, resource, none)
		assert.Equal(t, http.StatusForbidden, status, "the MCP endpoint needs the base scope")
		assert.Contains(t, challenge, `error="insufficient_scope", scope="mcp:tools"`)
	})
	t.Run("static token", func(t *testing.T) {
		status, _ := request(t, http.MethodGet, srv.URL+"/status", "the-static-token")
		assert.Equal(t, http.StatusOK, status)
	})
}

// An admin tool (ResourceServer.AdminTools, e.g. the management tools)
// is refused to a caller whose token lacks the admin scope, with
// CodeInsufficientScope, and served to one who has it; other tools need
// only the base scope.
func TestGatewayResourceServerAdminTools(t *testing.T) {
	ln, resource := loopbackListener(t)
	issuer := oauthtest.StartOIDCProvider(t, "..", resource, 60, "OIDC_SCOPES=mcp:tools mcpvisor:admin")
	v, err := authn.New(authn.Options{Issuer: issuer, Audience: resource})
	require.NoError(t, err)
	sup, err := mcpvisor.Start(context.Background(), mcpvisor.Options{Builtins: []mcpvisor.BuiltinTool{{
		Definition: protocol.Tool{Name: "mcp__mgmt__reload_all", InputSchema: json.RawMessage(`{"type":"object"}`)},
		Call: func(context.Context, json.RawMessage) (*protocol.CallToolResult, error) {
			return textResult("reloaded"), nil
		},
	}}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sup.Close(testwait.Context(t))) })
	_, err = sup.SetServers(context.Background(), map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}},
		mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	serveOn(t, sup, gateway.Options{ResourceServer: &gateway.ResourceServer{Validator: v, Resource: resource,
		AuthorizationServers: []string{issuer}, AdminTools: []string{"mcp__mgmt__*"}}}, ln)

	client := func(scope string) *mcpvisor.Supervisor {
		tok := ccToken(t, issuer, map[bool]string{true: "cc-admin", false: "cc-user"}[strings.Contains(scope, "admin")], resource, scope)
		host := upstream(t, map[string]mcpvisor.ServerConfig{"gw": {Config: transports.Config{Type: "http", URL: resource,
			Headers: map[string]string{"Authorization": "Bearer " + tok}}}})
		require.Equal(t, mcpvisor.StateReady, host.Status()[0].State, host.Status()[0].LastError)
		return host
	}
	ctx := testwait.Context(t)
	user := client("mcp:tools")
	var reload string
	for _, n := range names(user.Tools()) {
		if strings.HasSuffix(n, "reload_all") {
			reload = n
		}
	}
	require.NotEmpty(t, reload, names(user.Tools()))
	_, err = user.CallTool(ctx, reload, nil)
	require.Error(t, err)
	var perr *protocol.Error
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, int64(gateway.CodeInsufficientScope), perr.Code)
	assert.Contains(t, perr.Message, "mcpvisor:admin")
	res, err := user.CallTool(ctx, "mcp__gw__a__echo", map[string]any{"text": "hi"})
	require.NoError(t, err)
	assert.False(t, res.IsError)

	admin := client("mcp:tools mcpvisor:admin")
	res, err = admin.CallTool(ctx, reload, nil)
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	assert.Equal(t, "reloaded", res.Content[0].Text)
}

// A ResourceServer configured by halves is reported by Options.Validate,
// and a gateway given one without a Validator fails closed: every request
// but the metadata is refused.
func TestGatewayResourceServerFailsClosed(t *testing.T) {
	for _, rs := range []gateway.ResourceServer{
		{Resource: "http://127.0.0.1:1/mcp", AuthorizationServers: []string{"https://as"}},
		{Validator: refuseAllForTest{}, Resource: "mcp", AuthorizationServers: []string{"https://as"}},
		{Validator: refuseAllForTest{}, Resource: "http://127.0.0.1:1/mcp"},
		{Validator: refuseAllForTest{}, Resource: "http://127.0.0.1:1/mcp", AuthorizationServers: []string{"https://as"}, AdminTools: []string{"["}},
	} {
		assert.ErrorIs(t, gateway.Options{ResourceServer: &rs}.Validate(), gateway.ErrInvalidOptions, "%+v", rs)
	}
	ln, resource := loopbackListener(t)
	srv := serveOn(t, authStub{}, gateway.Options{ResourceServer: &gateway.ResourceServer{Resource: resource,
		AuthorizationServers: []string{"https://as.example"}}}, ln)
	status, _ := request(t, http.MethodPost, resource, "some-token")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	status, challenge := request(t, http.MethodGet, srv.URL+"/status", "")
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Contains(t, challenge, "resource_metadata=")
	status, _ = request(t, http.MethodGet, srv.URL+"/.well-known/oauth-protected-resource/mcp", "")
	assert.Equal(t, http.StatusOK, status)
}

type refuseAllForTest struct{}

func (refuseAllForTest) ValidateToken(context.Context, string) (gateway.Identity, error) {
	return gateway.Identity{}, gateway.ErrInvalidToken
}
