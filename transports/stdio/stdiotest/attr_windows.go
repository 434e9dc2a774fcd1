//go:build windows

package stdiotest

import (
	"syscall"
	"testing"
)

// asNobody skips the test: Windows has no user nobody to run as.
func asNobody(t testing.TB) *syscall.SysProcAttr {
	t.Skip("running as another user is Unix only")
	return nil
}
