//go:build plan9

package userdirs

import "os"

// stateBase is the configuration directory ($home/lib) on Plan 9.
func stateBase() (string, error) { return os.UserConfigDir() }
