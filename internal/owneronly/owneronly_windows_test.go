//go:build windows

package owneronly

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/windows"
)

// A created directory and a restricted file carry a protected DACL with
// one entry, for the current user.
func TestOwnerOnlyDACL(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	require.NoError(t, MkdirAll(dir))
	f := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(f, []byte("x"), 0o600))
	require.NoError(t, Restrict(f))
	user, err := windows.GetCurrentProcessToken().GetTokenUser()
	require.NoError(t, err)
	for _, p := range []string{dir, f} {
		sd, err := windows.GetNamedSecurityInfo(p, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION)
		require.NoError(t, err, p)
		s := sd.String()
		assert.Contains(t, s, "D:P", "%s: protected DACL in %s", p, s)
		assert.Contains(t, s, user.User.Sid.String(), "%s: the owner's entry in %s", p, s)
		assert.NotContains(t, s, ";;;WD)", "%s: no entry for Everyone in %s", p, s)
		assert.NotContains(t, s, ";;;BU)", "%s: no entry for Users in %s", p, s)
	}
}
