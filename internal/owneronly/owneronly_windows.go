//go:build windows

package owneronly

import (
	"fmt"

	"golang.org/x/sys/windows"
)

// restrictDir gives dir a protected DACL with one entry: full control for
// the current user, inherited by what is created inside.
func restrictDir(dir string) error { return setOwnerDACL(dir, "OICI") }

// restrictFile gives the file a protected DACL with one entry: full
// control for the current user.
func restrictFile(path string) error { return setOwnerDACL(path, "") }

func setOwnerDACL(path, inherit string) error {
	user, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return fmt.Errorf("owner-only %s: reading the current user: %w", path, err)
	}
	sd, err := windows.SecurityDescriptorFromString(fmt.Sprintf("D:P(A;%s;FA;;;%s)", inherit, user.User.Sid))
	if err != nil {
		return fmt.Errorf("owner-only %s: %w", path, err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("owner-only %s: %w", path, err)
	}
	err = windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil)
	if err != nil {
		return fmt.Errorf("owner-only %s: setting its DACL: %w", path, err)
	}
	return nil
}
