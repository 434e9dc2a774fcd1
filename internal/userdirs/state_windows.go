//go:build windows

package userdirs

import "golang.org/x/sys/windows"

// stateBase is the user's local application data folder
// (%LOCALAPPDATA%), asked of the shell rather than the environment: it
// does not roam to other machines with the profile, as %APPDATA% does.
func stateBase() (string, error) {
	return windows.KnownFolderPath(windows.FOLDERID_LocalAppData, 0)
}
