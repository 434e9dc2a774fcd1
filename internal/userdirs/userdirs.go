// Package userdirs names the per-user directories mcpvisor keeps files
// in, by each platform's conventions.
//
//	          config (settings a user edits)     state (kept between runs, never roams)
//	Linux     $XDG_CONFIG_HOME or ~/.config      $XDG_STATE_HOME or ~/.local/state
//	macOS     ~/Library/Application Support     ~/Library/Application Support
//	Windows   %APPDATA% (roaming)               %LOCALAPPDATA% (this machine only)
//
// Each is followed by "mcpvisor". The environment variables are the
// platform's own conventions, read the way os.UserConfigDir reads them;
// a host that wants another place passes its own directory.
package userdirs

import (
	"errors"
	"os"
	"path/filepath"
)

// App is the directory name under the platform's user directories.
const App = "mcpvisor"

// ConfigDir is mcpvisor's user configuration directory:
// os.UserConfigDir()/mcpvisor.
func ConfigDir() (string, error) {
	d, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, App), nil
}

// StateDir is mcpvisor's user state directory (approvals, lock files,
// credentials of the file store on Windows): what it keeps between runs,
// private to the user and to this machine. See the package comment for
// each platform's choice. It is not created.
func StateDir() (string, error) {
	d, err := stateBase()
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(d) {
		return "", errors.New("user state directory is not absolute: " + d)
	}
	return filepath.Join(d, App), nil
}
