//go:build unix

package stdiotest

import (
	"syscall"
	"testing"
)

// asNobody runs a process as the user nobody (65534).
func asNobody(testing.TB) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
}
