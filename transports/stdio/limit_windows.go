//go:build windows

package stdio

import "syscall"

// resourceLimit tells which sandbox limit a server ran into: none on
// Windows, where servers are not confined.
func resourceLimit(syscall.Signal, string) string { return "" }

// oomSearchBytes is how much of the end of a server's stderr
// resourceLimit reads.
const oomSearchBytes = 0
