//go:build unix

package owneronly

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Created directories are 0700 whatever the umask allowed; an existing
// parent keeps its mode; Restrict makes a file 0600.
func TestOwnerOnlyModes(t *testing.T) {
	base := t.TempDir()
	require.NoError(t, os.Chmod(base, 0o755))
	dir := filepath.Join(base, "a", "b")
	require.NoError(t, MkdirAll(dir))
	for _, d := range []string{filepath.Join(base, "a"), dir} {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), d)
	}
	fi, err := os.Stat(base)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "an existing directory is left alone")
	require.NoError(t, MkdirAll(dir), "existing: no error")

	f := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(f, nil, 0o644))
	require.NoError(t, Restrict(f))
	fi, err = os.Stat(f)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}
