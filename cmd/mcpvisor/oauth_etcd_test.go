package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/cluster/etcdstore"
	"github.com/mcpvisor/mcpvisor/internal/etcdtest"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Two `mcpvisor supervise` processes share a server's OAuth credentials
// through a real etcd (--token-store etcd). The authorization server is
// node-oidc-provider, which rotates refresh tokens and revokes the whole
// grant when one is used twice. Each round the access token expires and
// a client calls through both gateways at once: one refresh in all, the
// rotated refresh token persisted once, no call fails, both stay ready.
func TestTwoProcessesShareOAuthTokensThroughEtcd(t *testing.T) {
	const ttl = 3 // seconds: tokens expire during the test
	endpoint := etcdtest.Start(t)
	mock, err := mockserver.Serve(context.Background(), mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mock.Close() })
	mu, err := url.Parse(mock.URL)
	require.NoError(t, err)
	rs, err := oauthtest.NewResourceServer("http://"+mu.Host, "mcp:tools")
	require.NoError(t, err)
	t.Cleanup(rs.Close)
	issuer := oauthtest.StartOIDCProvider(t, "../..", rs.Resource(), ttl)
	rs.SetIssuer(issuer)

	// Log in once, here, into etcd.
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	store := etcdstore.NewTokenStore(c, etcdstore.Options{Prefix: "/two-processes"})
	login, err := mcpvisor.Start(context.Background(), mcpvisor.Options{Logger: zerolog.Nop(), OAuth: mcpvisor.OAuthOptions{Store: store}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = login.SetServers(ctx, map[string]mcpvisor.ServerConfig{"r": {Config: transports.Config{Type: transports.TypeHTTP, URL: rs.Resource()}}},
		mcpvisor.AwaitSettled(20*time.Second))
	require.NoError(t, err)
	require.NoError(t, login.Server("r").Login(ctx, &oauth.HeadlessUserAgent{Redirect: "http://127.0.0.1:8979/callback"}))
	require.NoError(t, login.Close(ctx))

	cfg := writeConfig(t, map[string]any{"r": map[string]any{"type": "http", "url": rs.Resource()}})
	member := func() string {
		p := startLogged(t, exec.Command(binPath, "supervise", "--config", cfg, "--listen", "127.0.0.1:0", "--state-dir", sharedStateDir,
			"--token-store", "etcd", "--etcd-endpoint", endpoint, "--etcd-prefix", "/two-processes"))
		return gatewayURL(t, p.logs)
	}
	gateways := []string{member(), member()}
	type serverStatus struct {
		Name  string
		State string
		Auth  *oauth.Status
	}
	status := func(base string) serverStatus {
		r := cli(t, "status", "--url", base, "--json")
		var rep struct{ Servers []serverStatus }
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
		require.Len(t, rep.Servers, 1)
		return rep.Servers[0]
	}
	refreshes := func() int {
		n := 0
		for _, g := range gateways {
			if st := status(g); st.Auth != nil {
				n += st.Auth.Refreshes
			}
		}
		return n
	}
	clients := make([]*mcpvisor.Supervisor, len(gateways))
	for i, g := range gateways {
		deadline := time.Now().Add(20 * time.Second)
		for st := status(g); st.State != "ready"; st = status(g) {
			require.True(t, time.Now().Before(deadline), "member %d: r is %s, not ready: it did not find the token in etcd", i, st.State)
			time.Sleep(100 * time.Millisecond) // polling the member's status
		}
		h, err := mcpvisor.Start(context.Background(), mcpvisor.Options{Logger: zerolog.Nop()})
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			assert.NoError(t, h.Close(ctx))
		})
		_, err = h.SetServers(ctx, map[string]mcpvisor.ServerConfig{"gw": {Config: transports.Config{Type: transports.TypeHTTP, URL: g + "/mcp"}}},
			mcpvisor.AwaitSettled(20*time.Second))
		require.NoError(t, err)
		clients[i] = h
	}
	refreshToken := func() string {
		e, err := store.Load(context.Background(), rs.Resource(), issuer)
		require.NoError(t, err)
		require.NotNil(t, e)
		require.NotNil(t, e.Token)
		return e.Token.RefreshToken
	}
	for round := range 2 {
		before, rt := refreshes(), refreshToken()
		time.Sleep(ttl * time.Second) // testwait:ok not a wait: the token must expire
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 10 {
			for _, h := range clients {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					res, err := h.CallTool(ctx, "mcp__gw__r__echo", map[string]any{"text": "shared"})
					if err == nil && res.IsError {
						err = errorString(res.Content[0].Text)
					}
					if err != nil {
						errs <- err
					}
				})
			}
		}
		testwait.Call(t, "the calls through both members", wg.Wait)
		close(errs)
		for err := range errs {
			t.Errorf("round %d: a call failed: %v", round, err)
		}
		assert.Equal(t, before+1, refreshes(), "round %d: one refresh between both processes", round)
		assert.NotEqual(t, rt, refreshToken(), "round %d: the rotated refresh token was persisted", round)
		for i, g := range gateways {
			assert.Equal(t, "ready", status(g).State, "round %d: member %d (a refresh token spent twice would have revoked the grant)", round, i)
		}
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
