package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The CLI keeps the discovery cache in its state directory: once a lazy
// server has been used (call), the next run lists its tools without
// starting it.
func TestLazyServerToolsAreCachedInTheStateDir(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	env := []string{envStateDir + "=" + state}
	cfg := writeConfig(t, map[string]any{
		"sleepy": map[string]any{"command": binPath, "args": []string{"mock", "-name", "sleepy"}, "lazy": true},
	})

	r := cliIn(t, "", env, "list", "--json", "--config", cfg)
	require.Equal(t, 0, r.code, r.stderr)
	out := decodeList(t, r.stdout)
	assert.Empty(t, out.Tools, "never used: its tools are unknown")

	r = cliIn(t, "", env, "call", "--config", cfg, "mcp__sleepy__echo", `{"text":"wake up"}`)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "wake up")
	entries, err := filepath.Glob(filepath.Join(state, "discovery", "*.json"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "the listing is kept in <state dir>/discovery")
	st, err := os.Stat(entries[0])
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	r = cliIn(t, "", env, "list", "--json", "--config", cfg)
	require.Equal(t, 0, r.code, r.stderr)
	out = decodeList(t, r.stdout)
	require.Len(t, out.Servers, 1)
	assert.Equal(t, "pending", out.Servers[0].State, "still not started")
	var names []string
	for _, tl := range out.Tools {
		names = append(names, tl.Name)
	}
	assert.Contains(t, names, "mcp__sleepy__echo", "its tools, from the cache")
	assert.Len(t, names, 5)
}
