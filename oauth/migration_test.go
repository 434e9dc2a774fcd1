package oauth

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// SEP-2352: a resource that moves to another authorization server (its
// metadata lists the new one, and it refuses the old one's tokens) gets
// the client registered with the new server; the old server's client and
// tokens are never presented to it, and stay stored under their issuer.
func TestAuthorizationServerMigration(t *testing.T) {
	as2 := newFakeAS(t, nil)
	f := newFakeAS(t, func(f *fakeAS) { f.trust = as2 })
	store := &MemoryStore{}
	s := newSource(t, f, func(c *Config) { c.Store = store })
	mustCall(t, s, f.mcpURL())
	require.Equal(t, 1, f.count("POST /register"))
	as1Client := f.regsClientID(0)

	f.mu.Lock()
	f.prmIssuers, f.refuseOwn = []string{as2.issuer()}, true
	f.mu.Unlock()
	mustCall(t, s, f.mcpURL())

	assert.Equal(t, 1, as2.count("POST /register"), "registered with the new server")
	assert.Equal(t, 1, f.count("POST /register"))
	assert.Equal(t, 1, f.count("GET /authorize"), "not authorized again at the old server")
	assert.Len(t, f.tokenReqs, 1, "no refresh at the old server for the new one")
	require.Len(t, as2.authReqs, 1)
	assert.NotEqual(t, as1Client, as2.authReqs[0].Get("client_id"))
	for _, form := range as2.tokenReqs {
		assert.NotEqual(t, as1Client, form.Get("client_id"), "the old server's client is never presented to the new one")
	}
	assert.Equal(t, as2.issuer(), s.Status().Issuer)

	old, err := store.Load(ctx(t), s.ServerURL(), f.issuer())
	require.NoError(t, err)
	require.NotNil(t, old)
	assert.Equal(t, as1Client, old.Client.ClientID, "the old server's credentials stay under its issuer")
	cur, err := store.Load(ctx(t), s.ServerURL(), as2.issuer())
	require.NoError(t, err)
	require.NotNil(t, cur)
	assert.NotEqual(t, as1Client, cur.Client.ClientID)

	// A source started later on the same store starts from the most
	// recent entry: the new server's.
	later := newSource(t, f, func(c *Config) { c.Store = store })
	mustCall(t, later, f.mcpURL())
	assert.Equal(t, 1, as2.count("POST /register"), "the new server's stored registration is reused")
}

// A 401 from a resource that did not move re-reads its metadata and
// refreshes at the same server: no new registration or authorization.
func TestUnmovedResourceRefreshesAtItsServer(t *testing.T) {
	f := newFakeAS(t, nil)
	s := newSource(t, f, nil)
	mustCall(t, s, f.mcpURL())
	metadataReads := f.count("GET /.well-known/oauth-authorization-server")
	prmReads := f.count("GET /.well-known/oauth-protected-resource")
	f.expireAccess()
	mustCall(t, s, f.mcpURL())
	assert.Equal(t, prmReads+1, f.count("GET /.well-known/oauth-protected-resource"), "the metadata is re-read after the 401")
	assert.Equal(t, metadataReads, f.count("GET /.well-known/oauth-authorization-server"))
	assert.Equal(t, 1, f.count("POST /register"))
	assert.Equal(t, 1, f.count("GET /authorize"))
	assert.Equal(t, "refresh_token", f.tokenReqs[len(f.tokenReqs)-1].Get("grant_type"))
}
