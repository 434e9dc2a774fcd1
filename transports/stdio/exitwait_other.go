//go:build !linux

package stdio

// awaitExit cannot wait without a thread here; cmd.Wait does.
func awaitExit(pid int) bool { return false }
