package mcpvisor_test

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/etcdstore"
	"github.com/mcpvisor/mcpvisor/internal/etcdtest"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// An external test: the token store's package sits above the root (it
// implements oauth.Store for a cluster), so this test uses only the host
// API, and helpers of its own.

// etcdTestServer is a server config of transport kind at url.
func etcdTestServer(kind transports.Type, url string) mcpvisor.ServerConfig {
	return mcpvisor.ServerConfig{Config: transports.Config{Type: kind, URL: url}}
}

// etcdTestStatus is the status of server name on s.
func etcdTestStatus(t *testing.T, s *mcpvisor.Supervisor, name string) mcpvisor.ServerStatus {
	t.Helper()
	st, err := s.ServerStatus(name)
	require.NoError(t, err)
	return st
}

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
	issuer := oauthtest.StartOIDCProvider(t, ".", rs.Resource(), ttl)
	rs.SetIssuer(issuer)

	member := func(name string) (*mcpvisor.Supervisor, *etcdstore.TokenStore) {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		store := etcdstore.NewTokenStore(c, etcdstore.Options{Prefix: "/refresh-test"})
		s, err := mcpvisor.Start(context.Background(), mcpvisor.Options{
			Logger:            zerolog.Nop(),
			CloseStdinTimeout: 500 * time.Millisecond,
			TerminateTimeout:  500 * time.Millisecond,
			ConnectTimeout:    10 * time.Second,
			OAuth:             mcpvisor.OAuthOptions{Store: store, RefreshMargin: time.Second},
		})
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			assert.NoError(t, s.Close(ctx))
		})
		return s, store
	}
	setAndSettle := func(s *mcpvisor.Supervisor, cfg map[string]mcpvisor.ServerConfig) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := s.SetServers(ctx, cfg, mcpvisor.AwaitSettled(0))
		require.NoError(t, err)
		require.Empty(t, res.Errors)
	}
	call := func(s *mcpvisor.Supervisor, tool, text string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := s.CallTool(ctx, tool, map[string]string{"text": text})
		return err
	}
	statusOf := func(s *mcpvisor.Supervisor, name string) mcpvisor.ServerStatus { return etcdTestStatus(t, s, name) }
	cfg := map[string]mcpvisor.ServerConfig{"r": etcdTestServer(transports.TypeHTTP, rs.Resource())}
	a, store := member("a")
	setAndSettle(a, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	require.NoError(t, a.Login(ctx, "r", &oauth.HeadlessUserAgent{Redirect: "http://127.0.0.1:8978/callback"}))
	require.NoError(t, a.WaitSettled(ctx))
	cancel()
	require.Equal(t, mcpvisor.StateReady, statusOf(a, "r").State, statusOf(a, "r").LastError)

	b, _ := member("b")
	setAndSettle(b, cfg)
	require.Equal(t, mcpvisor.StateReady, statusOf(b, "r").State, "b found a's token in etcd: %s", statusOf(b, "r").LastError)

	refreshToken := func() string {
		e, err := store.Load(context.Background(), rs.Resource(), issuer)
		require.NoError(t, err)
		require.NotNil(t, e)
		require.NotNil(t, e.Token)
		return e.Token.RefreshToken
	}
	refreshes := func() int { return statusOf(a, "r").Auth.Refreshes + statusOf(b, "r").Auth.Refreshes }
	for round := range 3 {
		before, rt := refreshes(), refreshToken()
		time.Sleep(ttl * time.Second) // testwait:ok not a wait: the token must expire
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 10 {
			for _, s := range []*mcpvisor.Supervisor{a, b} {
				wg.Go(func() {
					if err := call(s, "mcp__r__echo", "shared"); err != nil {
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
		assert.Equal(t, mcpvisor.StateReady, statusOf(a, "r").State)
		assert.Equal(t, mcpvisor.StateReady, statusOf(b, "r").State, "no refresh token was spent twice (the provider would have revoked the grant)")
	}
}
