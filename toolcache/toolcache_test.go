package toolcache

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
)

func TestStoreLoadAndMiss(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	c := New(filepath.Join(t.TempDir(), "discovery"), func() time.Time { return now })
	_, _, ok, err := c.Load("a/b server", "h1")
	require.NoError(t, err)
	assert.False(t, ok, "nothing stored yet")

	tools := []protocol.Tool{{Name: "echo", Description: "Echoes."}}
	require.NoError(t, c.Store("a/b server", "h1", tools))
	got, saved, ok, err := c.Load("a/b server", "h1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "echo", got[0].Name)
	assert.Equal(t, "Echoes.", got[0].Description)
	assert.Equal(t, now, saved)

	_, _, ok, err = c.Load("a/b server", "h2")
	require.NoError(t, err)
	assert.False(t, ok, "another config's entry is no entry")
	_, _, ok, _ = c.Load("other", "h1")
	assert.False(t, ok)

	entries, err := os.ReadDir(c.Dir())
	require.NoError(t, err)
	require.Len(t, entries, 1, "one file per server, no temporary left")
	info, err := entries[0].Info()
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	require.NoError(t, c.Store("a/b server", "h2", nil))
	got, _, ok, _ = c.Load("a/b server", "h2")
	assert.True(t, ok, "the entry is replaced")
	assert.Empty(t, got)

	require.NoError(t, c.Forget("a/b server"))
	require.NoError(t, c.Forget("a/b server"), "forgetting nothing is fine")
	_, _, ok, _ = c.Load("a/b server", "h2")
	assert.False(t, ok)
}

func TestMalformedEntryIsAMissWithAnError(t *testing.T) {
	c := New(t.TempDir(), nil)
	require.NoError(t, c.Store("s", "h", nil))
	require.NoError(t, os.WriteFile(c.path("s"), []byte(`{"version":1,"server":"s","configHash":"h","tools":[`), 0o600))
	_, _, ok, err := c.Load("s", "h")
	assert.False(t, ok)
	assert.ErrorIs(t, err, ErrMalformed)
}

// Writers racing on one entry never leave a torn file: every read sees
// one whole entry.
func TestConcurrentStores(t *testing.T) {
	c := New(t.TempDir(), nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 20 {
				tools := make([]protocol.Tool, i+1)
				for k := range tools {
					tools[k] = protocol.Tool{Name: "t", Description: string(rune('a' + j%26))}
				}
				assert.NoError(t, c.Store("s", "h", tools))
				_, _, ok, err := c.Load("s", "h")
				assert.NoError(t, err)
				assert.True(t, ok)
			}
		})
	}
	testwait.Call(t, "the 8 writers and readers of the cache", wg.Wait)
}
