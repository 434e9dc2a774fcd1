//go:build unix

package sandboxtest

import "syscall"

// sessionAttr starts a process in a new session when setsid is set.
func sessionAttr(setsid bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: setsid} }
