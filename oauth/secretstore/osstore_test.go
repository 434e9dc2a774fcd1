//go:build windows || darwin

package secretstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/oauth"
)

// The platform's own store (Keychain on macOS, Credential Manager on
// Windows), as auto chooses it, under a service name of the test's own:
// entries load back whole, a record over the item limit is split and
// read back whole, Delete and List see the same, a file store migrates.
// This runs on the hosted macOS and Windows runners.
func TestPlatformStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	file := filepath.Join(dir, "oauth-tokens.json")
	now := time.Now().UTC().Truncate(time.Second)
	migrated := &oauth.Entry{ServerURL: "https://m.example/mcp", Issuer: "https://as.example", UpdatedAt: now,
		Token: &oauth.Token{AccessToken: "at-m", RefreshToken: "rt-migrated-0123456789", Expiry: now.Add(time.Hour)}}
	require.NoError(t, (&oauth.FileStore{Path: file}).Save(ctx, migrated))

	svc := fmt.Sprintf("mcpvisor-test-%d-%d", os.Getpid(), now.UnixNano())
	st, info, err := Open(ctx, Options{File: file, Service: svc})
	require.NoError(t, err)
	require.NotEqual(t, BackendFile, info.Backend, "auto found no OS store: %s", info.Fallback)
	t.Cleanup(func() {
		s := st.(*Store)
		v, err := s.open()
		if err != nil {
			return
		}
		defer v.close()
		names, _ := v.names()
		for _, n := range names {
			_ = v.remove(n)
		}
	})
	assert.Equal(t, 1, info.Migrated)
	_, err = os.Stat(file)
	assert.True(t, os.IsNotExist(err), "the file store is removed after the migration")
	got, err := st.Load(ctx, migrated.ServerURL, migrated.Issuer)
	require.NoError(t, err)
	assert.Equal(t, migrated, got)

	big := &oauth.Entry{ServerURL: "https://big.example/mcp", Issuer: "https://as.example", UpdatedAt: now,
		Token: &oauth.Token{AccessToken: strings.Repeat("A", 9000), RefreshToken: "rt-big", Expiry: now.Add(time.Hour)}}
	require.NoError(t, st.Save(ctx, big))
	got, err = st.Load(ctx, big.ServerURL, "")
	require.NoError(t, err)
	assert.Equal(t, big, got, "a record split over several items reads back whole")
	list, err := st.List(ctx)
	require.NoError(t, err)
	assert.Len(t, list, 2)
	require.NoError(t, st.Delete(ctx, big.ServerURL, ""))
	got, err = st.Load(ctx, big.ServerURL, "")
	require.NoError(t, err)
	assert.Nil(t, got)
	v, err := st.(*Store).open()
	require.NoError(t, err)
	names, err := v.names()
	v.close()
	require.NoError(t, err)
	for _, n := range names {
		assert.False(t, strings.HasPrefix(n, chunkPrefix), "chunk left after Delete: %s", n)
	}
}
