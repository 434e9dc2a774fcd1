//go:build !unix

package main

import "os/exec"

// ownGroup leaves cmd as it is: without Unix process groups, a
// cancellation kills go test alone (its WaitDelay then bounds the wait).
func ownGroup(cmd *exec.Cmd) {}
