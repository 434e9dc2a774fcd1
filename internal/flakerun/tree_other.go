//go:build !unix

package main

import "os/exec"

// killTreeOnCancel leaves cmd's cancellation to exec (a kill of go test
// alone): process groups are a Unix notion.
func killTreeOnCancel(cmd *exec.Cmd) {}
