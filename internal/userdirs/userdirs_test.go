//go:build !windows && !darwin && !plan9

package userdirs

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// On Linux the state directory follows XDG: $XDG_STATE_HOME when it is
// absolute, else ~/.local/state.
func TestStateDirFollowsXDG(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "")
	d, err := StateDir()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(home, ".local", "state", "mcpvisor"), d)

	t.Setenv("XDG_STATE_HOME", "/srv/state")
	d, err = StateDir()
	require.NoError(t, err)
	assert.Equal(t, "/srv/state/mcpvisor", d)

	t.Setenv("XDG_STATE_HOME", "relative/state")
	d, err = StateDir()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(home, ".local", "state", "mcpvisor"), d, "a relative XDG value is ignored, as the spec says")
}
