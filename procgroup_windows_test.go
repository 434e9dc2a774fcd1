//go:build windows

package mcpvisor

import "os/exec"

// ownGroup leaves cmd as it is: Windows has no process groups to signal.
func ownGroup(*exec.Cmd) {}

// killTree kills the process; its own children are not reached.
func killTree(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
