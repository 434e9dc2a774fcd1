//go:build windows

package userdirs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// On Windows the state directory is the local (not roaming) application
// data folder.
func TestStateDirIsLocalAppData(t *testing.T) {
	d, err := StateDir()
	require.NoError(t, err)
	want := filepath.Join(os.Getenv("LOCALAPPDATA"), "mcpvisor")
	assert.True(t, strings.EqualFold(want, d), "%s, want %s", d, want)
}
