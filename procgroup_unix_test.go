//go:build unix

package mcpvisor

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, so that killTree
// ends whatever it spawns too.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killTree SIGKILLs the process group of a command started with ownGroup.
func killTree(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
