package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/dashboard"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/transports"
)

// A server in needs-auth gets a "Log in" button; the button starts the
// OAuth login through the admin API, the page opens the authorization
// URL the gateway hands back in a new window (the authorization server
// grants at once and redirects to the supervisor's loopback callback),
// and the row turns ready.
func TestDashboardOAuthLogin(t *testing.T) {
	srv, err := mockserver.Serve(context.Background(), mockserver.Options{Transport: mockserver.TransportHTTP})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	mu, err := url.Parse(srv.URL)
	require.NoError(t, err)
	as, err := oauthtest.New("http://"+mu.Host, 3600)
	require.NoError(t, err)
	t.Cleanup(as.Close)

	logins := &dashboard.LoginRelay{}
	opts := mcpvisor.Options{Logger: zerolog.Nop()}
	logins.Configure(&opts)
	sup, err := mcpvisor.Start(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(ctx))
	})
	_, err = sup.SetServers(context.Background(), map[string]mcpvisor.ServerConfig{
		"secured": {Config: transports.Config{Type: "http", URL: as.URL + "/mcp"}},
	}, mcpvisor.AwaitSettled(15*time.Second))
	require.NoError(t, err)
	require.Equal(t, mcpvisor.StateNeedsAuth, sup.Status()[0].State, sup.Status()[0].LastError)
	_, gsrv := serve(t, sup, gateway.Options{LocalOnly: true}, dashboard.Options{Logins: logins})

	ctx := browser(t)
	errs := watchErrors(ctx)
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(gsrv.URL+"/")))
	waitJS(t, ctx, 15*time.Second, "the row in needs-auth", rowState("secured")+` === "needs-auth"`)
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(`#servers tr[data-server="secured"] button[data-action="login"]`, chromedp.ByQuery)))
	waitJS(t, ctx, 30*time.Second, "the row ready after the login", rowState("secured")+` === "ready"`)
	assert.Equal(t, mcpvisor.StateReady, sup.Status()[0].State)
	var authorized bool
	for _, r := range as.Requests() {
		if r.Path == "/as/authorize" || r.Path == "/authorize" {
			authorized = true
		}
	}
	assert.True(t, authorized, "the browser visited the authorization endpoint: %v", as.Requests())
	errs.check(t)
}

// The dashboard's login of a server held for approval answers 409 with
// why, and contacts nothing of the server (before, it answered 500, and
// a remote server's authorization was attempted).
func TestDashboardLoginOfHeldServer(t *testing.T) {
	var hits atomic.Int64
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://127.0.0.1:1/.well-known/oauth-protected-resource"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(remote.Close)
	logins := &dashboard.LoginRelay{}
	opts := mcpvisor.Options{Logger: zerolog.Nop()}
	logins.Configure(&opts)
	sup, err := mcpvisor.Start(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(ctx))
	})
	_, err = sup.SetServers(context.Background(), map[string]mcpvisor.ServerConfig{
		"held-remote": {Config: transports.Config{Type: "http", URL: remote.URL + "/mcp"}, NeedsApproval: "project server not approved"},
		"held-stdio":  {Config: mockserver.Command("-name", "held-stdio"), NeedsApproval: "project server not approved"},
	}, mcpvisor.AwaitSettled(15*time.Second))
	require.NoError(t, err)
	_, gsrv := serve(t, sup, gateway.Options{}, dashboard.Options{Logins: logins})

	for _, name := range []string{"held-remote", "held-stdio"} {
		code, body := do(t, http.MethodPost, gsrv.URL+"/admin/servers/"+name+"/login", "", nil)
		assert.Equal(t, http.StatusConflict, code, "%s: %s", name, body)
		assert.Contains(t, body, "needs approval", name)
		assert.Contains(t, body, "approve it before logging in", name)
	}
	assert.Zero(t, hits.Load(), "the held remote server was contacted")
	for _, st := range sup.Status() {
		assert.Equal(t, mcpvisor.StateNeedsApproval, st.State, st.Name)
	}
}
