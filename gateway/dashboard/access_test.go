package dashboard_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/access"
	"github.com/mcpvisor/mcpvisor/gateway/authn"
	"github.com/mcpvisor/mcpvisor/gateway/dashboard"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// accessDashboard runs a gateway with the dashboard behind a real
// authorization server (node-oidc-provider), over the mock servers a
// and b, with rules that give cc-user a and cc-admin b, as an admin. It
// returns the gateway's URL and the two callers' tokens (both with the
// admin scope, which the dashboard's endpoints need).
func accessDashboard(t *testing.T) (base, user, admin string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	resource := "http://" + ln.Addr().String() + gateway.MCPPath
	issuer := oauthtest.StartOIDCProvider(t, "../..", resource, 300, "OIDC_SCOPES=mcp:tools mcpvisor:admin")
	v, err := authn.New(authn.Options{Issuer: issuer, Audience: resource})
	require.NoError(t, err)
	cfg, err := access.Parse([]byte(`[
	  {"match": {"groups": "team-cc-user"}, "servers": {"allow": ["a"]}},
	  {"match": {"groups": "team-cc-admin"}, "servers": {"allow": ["b"]}, "admin": true}
	]`))
	require.NoError(t, err)
	policy, err := access.Compile(cfg)
	require.NoError(t, err)
	sup, err := mcpvisor.Start(context.Background(), mcpvisor.Options{Logger: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sup.Close(testwait.Context(t))) })
	_, err = sup.SetServers(testwait.Context(t), map[string]mcpvisor.ServerConfig{
		"a": {Config: mockserver.Command("-name", "a")},
		"b": {Config: mockserver.Command("-name", "b")},
	}, mcpvisor.AwaitSettled(testwait.Patience))
	require.NoError(t, err)
	rs := &gateway.ResourceServer{Validator: v, Resource: resource, AuthorizationServers: []string{issuer}, Scopes: []string{"mcp:tools"}}
	g := gateway.New(sup, gateway.Options{ResourceServer: rs, Access: policy, Parts: []gateway.Part{dashboard.New(dashboard.Options{})}})
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
	token := func(who string) string {
		form := url.Values{"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {"mcp:tools mcpvisor:admin"}}
		req, err := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(who, who+"-secret")
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&tok))
		return tok.AccessToken
	}
	return srv.URL, token("cc-user"), token("cc-admin")
}

// Behind a proxy that puts each user's access token on the requests of
// their browser, the dashboard shows each caller what its access rules
// let it use: cc-user sees a's row only, with no action (it is no
// admin); cc-admin sees b's row only, with its buttons. Through the
// HTTP endpoints, cc-user's actions are refused 403, and so are
// cc-admin's on a.
func TestDashboardShowsEachCallerItsServers(t *testing.T) {
	base, user, admin := accessDashboard(t)

	for _, tc := range []struct {
		who, token, path string
		want             int
	}{
		{"cc-user", user, "/admin/servers/a/reconnect", http.StatusForbidden},
		{"cc-admin", admin, "/admin/servers/a/toggle", http.StatusForbidden},
		{"cc-admin", admin, "/admin/servers/b/reconnect", http.StatusOK},
	} {
		status, body := do(t, http.MethodPost, base+tc.path, "", map[string]string{"Authorization": "Bearer " + tc.token})
		assert.Equal(t, tc.want, status, "%s %s: %s", tc.who, tc.path, body)
	}

	ctx := browser(t)
	errs := watchErrors(ctx)
	require.NoError(t, chromedp.Run(ctx, network.Enable()))
	for _, tc := range []struct {
		who, token, mine string
		admin            bool
	}{{"cc-user", user, "a", false}, {"cc-admin", admin, "b", true}} {
		require.NoError(t, chromedp.Run(ctx,
			network.SetExtraHTTPHeaders(network.Headers{"Authorization": "Bearer " + tc.token}),
			chromedp.Navigate(base+"/")))
		waitJS(t, ctx, 30*time.Second, tc.who+": the stream to be live", `document.getElementById("conn").dataset.state === "live"`)
		waitJS(t, ctx, 15*time.Second, tc.who+": its server's row, ready", rowState(tc.mine)+` === "ready"`)
		var rows []string
		require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(
			`[...document.querySelectorAll("#servers tr[data-server]")].map((tr) => tr.dataset.server)`, &rows)))
		assert.Equal(t, []string{tc.mine}, rows, tc.who)
		var buttons int
		var reconnectAll bool
		require.NoError(t, chromedp.Run(ctx,
			chromedp.Evaluate(`document.querySelectorAll("#servers button[data-action]").length`, &buttons),
			chromedp.Evaluate(`!document.getElementById("reconnect-all").hidden`, &reconnectAll)))
		assert.Equal(t, tc.admin, buttons > 0, "%s: the row's action buttons", tc.who)
		assert.Equal(t, tc.admin, reconnectAll, "%s: reconnect all", tc.who)
	}
	errs.check(t)
}
