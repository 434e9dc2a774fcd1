package etcdstore_test

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// Two supervisors, each with its own etcd client (its own connection and
// leases, as two members of a cluster have), share a server's OAuth
// credentials through the etcd token store. A real authorization server
// (node-oidc-provider) rotates refresh tokens and revokes the whole grant
// when one is used twice. Each round the access token expires and both
// supervisors call at once, 10 calls each: one refresh in all (the etcd
// lock, and the entry re-read after taking it), the rotated refresh token
// persisted once, no call fails, and both stay ready — a refresh token
// spent twice would have ended the grant.
func TestEtcdTokenStoreTwoMembersRefreshOnce(t *testing.T) {
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

	cfg := map[string]mcpvisor.ServerConfig{"r": {Config: transports.Config{Type: transports.TypeHTTP, URL: rs.Resource()}}}
	member := func() (*mcpvisor.Supervisor, *etcdstore.TokenStore) {
		store := etcdstore.NewTokenStore(client(t, endpoint), etcdstore.Options{Prefix: "/refresh-test"})
		s, err := mcpvisor.Start(context.Background(), mcpvisor.Options{
			Logger:            zerolog.Nop(),
			OAuth:             mcpvisor.OAuthOptions{Store: store, RefreshMargin: time.Second},
			ConnectTimeout:    10 * time.Second,
			CloseStdinTimeout: 500 * time.Millisecond,
			TerminateTimeout:  500 * time.Millisecond,
		})
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			require.NoError(t, s.Close(ctx))
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = s.SetServers(ctx, cfg)
		require.NoError(t, err)
		require.NoError(t, s.WaitSettled(ctx))
		return s, store
	}
	statusOf := func(s *mcpvisor.Supervisor) mcpvisor.ServerStatus {
		for _, st := range s.Status() {
			if st.Name == "r" {
				return st
			}
		}
		t.Fatal("server r is not configured")
		return mcpvisor.ServerStatus{}
	}
	a, store := member()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	require.NoError(t, a.Server("r").Login(ctx, &oauth.HeadlessUserAgent{Redirect: "http://127.0.0.1:8978/callback"}))
	require.NoError(t, a.WaitSettled(ctx))
	cancel()
	require.Equal(t, mcpvisor.StateReady, statusOf(a).State, statusOf(a).LastError)

	b, _ := member()
	require.Equal(t, mcpvisor.StateReady, statusOf(b).State, "b found a's token in etcd: %s", statusOf(b).LastError)

	refreshToken := func() string {
		e, err := store.Load(context.Background(), rs.Resource(), issuer)
		require.NoError(t, err)
		require.NotNil(t, e)
		require.NotNil(t, e.Token)
		return e.Token.RefreshToken
	}
	refreshes := func() int { return statusOf(a).Auth.Refreshes + statusOf(b).Auth.Refreshes }
	for round := range 3 {
		before, rt := refreshes(), refreshToken()
		time.Sleep(ttl * time.Second) // testwait:ok not a wait: the token must expire
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 10 {
			for _, s := range []*mcpvisor.Supervisor{a, b} {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					if _, err := s.CallTool(ctx, "mcp__r__echo", map[string]string{"text": "shared"}); err != nil {
						errs <- err
					}
				})
			}
		}
		testwait.Call(t, "the calls of both members", wg.Wait)
		close(errs)
		for err := range errs {
			t.Errorf("round %d: a call failed: %v", round, err)
		}
		assert.Equal(t, before+1, refreshes(), "round %d: one refresh between both members", round)
		assert.NotEqual(t, rt, refreshToken(), "round %d: the rotated refresh token was persisted", round)
		assert.Equal(t, mcpvisor.StateReady, statusOf(a).State)
		assert.Equal(t, mcpvisor.StateReady, statusOf(b).State, "no refresh token was spent twice (the provider would have revoked the grant)")
	}
}
