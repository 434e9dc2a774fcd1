//go:build !linux

package reaper

// Hold does nothing here: there is no process helper on this platform.
func Hold() (release func()) { return func() {} }
