//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// killTreeOnCancel starts cmd in a process group of its own and has its
// cancellation kill the whole group (go test and the test binaries it
// runs).
func killTreeOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
