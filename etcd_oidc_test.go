package mcpvisor

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

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/etcdstore"
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
	mock := serveMock(t, mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}})
	mu, err := url.Parse(mock.URL)
	require.NoError(t, err)
	rs, err := oauthtest.NewResourceServer("http://"+mu.Host, "mcp:tools")
	require.NoError(t, err)
	t.Cleanup(rs.Close)
	issuer := oauthtest.StartOIDCProvider(t, "..", rs.Resource(), ttl)
	rs.SetIssuer(issuer)

	member := func(name string) (*Supervisor, *etcdstore.TokenStore) {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		store := etcdstore.NewTokenStore(c, etcdstore.Options{Prefix: "/refresh-test"})
		opts := testOptions
		opts.Logger = zerolog.Nop()
		opts.OAuth = OAuthOptions{Store: store, RefreshMargin: time.Second}
		return start(t, opts), store
	}
	cfg := map[string]ServerConfig{"r": remoteServer(transports.TypeHTTP, rs.Resource())}
	a, store := member("a")
	setAndSettle(t, a, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	require.NoError(t, a.Login(ctx, "r", &oauth.HeadlessUserAgent{Redirect: "http://127.0.0.1:8978/callback"}))
	require.NoError(t, a.WaitSettled(ctx))
	cancel()
	require.Equal(t, StateReady, statusOf(a, "r").State, statusOf(a, "r").LastError)

	b, _ := member("b")
	setAndSettle(t, b, cfg)
	require.Equal(t, StateReady, statusOf(b, "r").State, "b found a's token in etcd: %s", statusOf(b, "r").LastError)

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
			for _, s := range []*Supervisor{a, b} {
				wg.Go(func() {
					if _, err := call(t, s, "mcp__r__echo", "shared"); err != nil {
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
		assert.Equal(t, StateReady, statusOf(a, "r").State)
		assert.Equal(t, StateReady, statusOf(b, "r").State, "no refresh token was spent twice (the provider would have revoked the grant)")
	}
}
