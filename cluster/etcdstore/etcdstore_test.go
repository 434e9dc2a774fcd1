package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mcpvisor/mcpvisor/cluster/etcdstore"
	"github.com/mcpvisor/mcpvisor/internal/etcdtest"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/oauth"
)

// client returns a new etcd client of endpoint: each stands for one
// process (its own connection and leases).
func client(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// Two processes' stores see each other's entries: load by issuer or the
// latest without one, list sorted, delete one issuer or all.
func TestEtcdTokenStoreIsShared(t *testing.T) {
	endpoint := etcdtest.Start(t)
	a := etcdstore.NewTokenStore(client(t, endpoint), etcdstore.Options{Prefix: "/t1"})
	b := etcdstore.NewTokenStore(client(t, endpoint), etcdstore.Options{Prefix: "/t1"})
	ctx := testwait.Context(t)
	now := time.Unix(1_800_000_000, 0).UTC()
	e1 := &oauth.Entry{ServerURL: "https://mcp.example/mcp", Issuer: "https://as1.example", Scope: "a",
		Client: &oauth.ClientInfo{ClientID: "c1"}, Token: &oauth.Token{AccessToken: "at1", RefreshToken: "rt1", Expiry: now}, UpdatedAt: now}
	e2 := &oauth.Entry{ServerURL: "https://mcp.example/mcp", Issuer: "https://as2.example/t", Scope: "b", UpdatedAt: now.Add(time.Minute)}
	e3 := &oauth.Entry{ServerURL: "https://other.example/mcp", Issuer: "https://as1.example", UpdatedAt: now}
	for _, e := range []*oauth.Entry{e1, e2, e3} {
		require.NoError(t, a.Save(ctx, e))
	}
	got, err := b.Load(ctx, e1.ServerURL, e1.Issuer)
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, "rt1", got.Token.RefreshToken)
	assert.Equal(t, "c1", got.Client.ClientID)
	latest, err := b.Load(ctx, e1.ServerURL, "")
	require.NoError(t, err)
	assert.Equal(t, e2.Issuer, latest.Issuer, "without an issuer: the latest updated")
	list, err := b.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 3)
	assert.Equal(t, []string{e1.Issuer, e2.Issuer, e3.Issuer}, []string{list[0].Issuer, list[1].Issuer, list[2].Issuer})

	require.NoError(t, b.Delete(ctx, e1.ServerURL, e1.Issuer))
	got, err = a.Load(ctx, e1.ServerURL, e1.Issuer)
	require.NoError(t, err)
	assert.Nil(t, got)
	require.NoError(t, b.Delete(ctx, e1.ServerURL, ""))
	list, err = a.List(ctx)
	require.NoError(t, err)
	assert.Len(t, list, 1, "the other server's entry stays")
	none, err := etcdstore.NewTokenStore(client(t, endpoint), etcdstore.Options{Prefix: "/t2"}).List(ctx)
	require.NoError(t, err)
	assert.Empty(t, none, "another prefix is another store")
}

// Lock is exclusive across processes: while one holds a server's lock,
// another's Lock waits and ends with its ctx; another server's lock is
// free; after unlock the other takes it; a holder that dies (its client
// gone, its lease not kept alive) releases it within LockTTL.
func TestEtcdTokenStoreLockAcrossProcesses(t *testing.T) {
	endpoint := etcdtest.Start(t)
	opts := etcdstore.Options{Prefix: "/locks", LockTTL: 2 * time.Second}
	a := etcdstore.NewTokenStore(client(t, endpoint), opts)
	b := etcdstore.NewTokenStore(client(t, endpoint), opts)
	ctx := testwait.Context(t)
	unlock, err := a.Lock(ctx, "https://mcp.example/mcp")
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = b.Lock(short, "https://mcp.example/mcp")
	cancel()
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	other, err := b.Lock(ctx, "https://other.example/mcp")
	require.NoError(t, err, "another server's lock is free")
	other()

	unlock()
	unlock() // idempotent
	unlockB, err := b.Lock(ctx, "https://mcp.example/mcp")
	require.NoError(t, err)
	unlockB()

	dying, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	_, err = etcdstore.NewTokenStore(dying, opts).Lock(ctx, "https://mcp.example/mcp")
	require.NoError(t, err)
	dying.Close() // the process dies holding the lock
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	unlockB, err = b.Lock(wait, "https://mcp.example/mcp")
	require.NoError(t, err, "the dead holder's lease expired")
	unlockB()
}

// The session store: a deletion is seen by every process and stays
// (later extras do not revive the session), extras follow the session,
// records end with their lease.
func TestEtcdSessionStore(t *testing.T) {
	endpoint := etcdtest.Start(t)
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	a := etcdstore.NewSessionStore(client(t, endpoint), etcdstore.Options{Now: clock})
	b := etcdstore.NewSessionStore(client(t, endpoint), etcdstore.Options{Now: clock})
	ctx := testwait.Context(t)
	rec, err := b.Load(ctx, "00ff")
	require.NoError(t, err)
	assert.Equal(t, mcpserver.SessionRecord{}, rec)

	x := mcpserver.SessionExtras{LogLevel: "warning", Subscriptions: []string{"demo://a", "demo://b"}}
	require.NoError(t, a.SaveExtras(ctx, "00ff", x, now.Add(time.Hour)))
	rec, err = b.Load(ctx, "00ff")
	require.NoError(t, err)
	assert.Equal(t, mcpserver.SessionRecord{Extras: x}, rec)

	require.NoError(t, b.Delete(ctx, "00ff", now.Add(time.Hour)))
	require.NoError(t, a.SaveExtras(ctx, "00ff", x, now.Add(time.Hour)))
	rec, err = a.Load(ctx, "00ff")
	require.NoError(t, err)
	assert.True(t, rec.Deleted, "a deletion stays")

	c := client(t, endpoint)
	leases, err := c.Leases(ctx)
	require.NoError(t, err)
	before := len(leases.Leases)
	many := etcdstore.NewSessionStore(c, etcdstore.Options{Now: clock})
	for i := range 50 {
		require.NoError(t, many.SaveExtras(ctx, fmt.Sprintf("%04x", i), x, now.Add(time.Hour+time.Duration(i)*time.Second)))
	}
	leases, err = c.Leases(ctx)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(leases.Leases)-before, 2, "sessions expiring within the same ten minutes share a lease")

	require.NoError(t, a.Delete(ctx, "0aaa", now.Add(-time.Hour))) // its id has expired: a lease of one second
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, err := b.Load(ctx, "0aaa")
		require.NoError(t, err)
		if !rec.Deleted {
			break
		}
		require.True(t, time.Now().Before(deadline), "the record of an expired session was not forgotten within 10 s")
		time.Sleep(100 * time.Millisecond) // polling etcd for the lease's end
	}
}

// A store etcd cannot serve fails with ErrUnavailable by the caller's
// deadline, never hangs.
func TestEtcdUnavailable(t *testing.T) {
	endpoint := etcdtest.Start(t)
	c := client(t, endpoint)
	s := etcdstore.NewTokenStore(c, etcdstore.Options{})
	require.NoError(t, c.Close())
	ctx, cancel := context.WithTimeout(testwait.Context(t), 2*time.Second)
	defer cancel()
	_, err := s.Load(ctx, "https://mcp.example/mcp", "")
	require.Error(t, err)
	assert.True(t, errors.Is(err, etcdstore.ErrUnavailable), "%v", err)
}
