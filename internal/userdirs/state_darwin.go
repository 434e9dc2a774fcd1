//go:build darwin

package userdirs

import "os"

// stateBase is ~/Library/Application Support, where macOS applications
// keep their data (os.UserConfigDir's answer there).
func stateBase() (string, error) { return os.UserConfigDir() }
