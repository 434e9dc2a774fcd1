package sandbox

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A runtime directory is used for the private temporary directories only
// when it is this user's alone and a tmpfs, and not in /dev/shm (shared
// with the user's other programs).
func TestPrivateTmpfs(t *testing.T) {
	uid := os.Getuid()
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skip("this system has no /dev/shm:", err)
	}
	shm, err := os.MkdirTemp("/dev/shm", "mcpvisor-test-")
	require.NoError(t, err)
	defer os.RemoveAll(shm)
	require.NoError(t, os.Chmod(shm, 0o700))
	assert.False(t, privateTmpfs(shm, uid), "a directory in /dev/shm")

	disk := t.TempDir()
	require.NoError(t, os.Chmod(disk, 0o700))
	if !privateTmpfs(disk, uid) { // /tmp may be a tmpfs
		dir, err := privateTempDir(t.TempDir(), disk)
		require.NoError(t, err)
		assert.NotContains(t, dir, disk, "not a tmpfs: the home directory's cache instead")
	}
	assert.False(t, privateTmpfs("relative", uid))
	assert.False(t, privateTmpfs(t.TempDir()+"/missing", uid))
}
