//go:build windows

package sandboxtest

import "syscall"

// sessionAttr: Windows has no sessions to leave; the process starts as
// any other.
func sessionAttr(bool) *syscall.SysProcAttr { return nil }
