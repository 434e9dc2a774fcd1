//go:build !linux

package sandboxtest

import "runtime"

func capabilities() (string, bool) { return "no capabilities on " + runtime.GOOS, false }
func rawSocket() (string, bool)    { return "not tried on " + runtime.GOOS, false }
func signal(int) (string, bool)    { return "not tried on " + runtime.GOOS, false }
func unmount(string) (string, bool) {
	return "not tried on " + runtime.GOOS, false
}
