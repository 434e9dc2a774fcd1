//go:build !windows && !darwin && !plan9

package userdirs

import (
	"os"
	"path/filepath"
)

// stateBase follows the XDG Base Directory specification, as
// os.UserConfigDir does for XDG_CONFIG_HOME: $XDG_STATE_HOME when it is
// an absolute path, else ~/.local/state.
func stateBase() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state"), nil
}
