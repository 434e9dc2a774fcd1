package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/transports"
)

// resolve follows relative and absolute links, through parents and
// chains, keeps a missing remainder as written, and stops at a loop.
func TestResolve(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	real := filepath.Join(base, "a", "real")
	require.NoError(t, os.MkdirAll(real, 0o755))
	require.NoError(t, os.Symlink("a/real", filepath.Join(base, "rel")))     // relative
	require.NoError(t, os.Symlink(real, filepath.Join(base, "abs")))         // absolute
	require.NoError(t, os.Symlink("rel", filepath.Join(base, "chain")))      // a link to a link
	require.NoError(t, os.Symlink("loop", filepath.Join(base, "loop")))      // itself
	require.NoError(t, os.Symlink("../../abs", filepath.Join(real, "back"))) // up and through another

	for _, tc := range []struct {
		path, want string
		links      int
	}{
		{filepath.Join(base, "rel"), real, 1},
		{filepath.Join(base, "abs", "x", "y"), filepath.Join(real, "x", "y"), 1},
		{filepath.Join(base, "chain"), real, 2},
		{filepath.Join(base, "rel", "back"), real, 3},
		{filepath.Join(base, "a", "real"), real, 0},
	} {
		got, links := resolve(tc.path)
		assert.Equal(t, tc.want, got, tc.path)
		assert.Len(t, links, tc.links, tc.path)
	}
	got, links := resolve(filepath.Join(base, "loop", "x"))
	assert.Len(t, links, maxLinks, "a loop stops after maxLinks links")
	assert.Equal(t, filepath.Join(base, "loop", "x"), got)
}

// A read path or working directory that leads to the home directory
// through a link is left out, like the home directory itself.
func TestVisibilityRefusesALinkToTheHome(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	home := filepath.Join(base, "home")
	require.NoError(t, os.MkdirAll(filepath.Join(home, "ok"), 0o755))
	require.NoError(t, os.Symlink(home, filepath.Join(base, "tohome")))
	require.NoError(t, os.Symlink(filepath.Join(home, "ok"), filepath.Join(base, "took")))
	v := visibility(&transports.Sandbox{Enabled: true, Read: []string{filepath.Join(base, "tohome"), filepath.Join(base, "took")}},
		Command{Dir: filepath.Join(base, "tohome")}, home)
	assert.Equal(t, []string{filepath.Join(home, "ok")}, v.read)
	assert.Len(t, v.notes, 2)
}
