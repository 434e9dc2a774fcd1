package confine

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Securebits (linux/securebits.h) that keep uid 0 from meaning
// capabilities: an execve by root gains none (NOROOT), a change of uid
// neither gives nor takes any (NO_SETUID_FIXUP), no ambient capability
// can be raised; each locked.
const (
	secbitNoroot            = 1 << 0
	secbitNorootLocked      = 1 << 1
	secbitNoSetuidFixup     = 1 << 2
	secbitNoSetuidFixupLock = 1 << 3
	secbitKeepCapsLocked    = 1 << 5
	secbitNoAmbientRaise    = 1 << 6
	secbitNoAmbientLocked   = 1 << 7

	secbitsConfined = secbitNoroot | secbitNorootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLock |
		secbitKeepCapsLocked | secbitNoAmbientRaise | secbitNoAmbientLocked
)

// capSetpcap is CAP_SETPCAP: needed to drop from the bounding set and to
// set securebits.
const capSetpcap = 8

// dropCapabilities leaves the calling thread (and what it executes) with
// no capability and no way to gain one: as root (holding CAP_SETPCAP) it
// locks the securebits above and empties the bounding set; then it
// clears the ambient set and the effective, permitted and inheritable
// sets. An unprivileged caller, which may not change its bounding set,
// has no capability to drop and cannot gain one: no_new_privs (set by
// the caller) stops setuid and file capabilities at execve.
func dropCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	if data[0].Effective&(1<<capSetpcap) != 0 {
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, secbitsConfined, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_SECUREBITS): %w", err)
		}
		for c := 0; ; c++ {
			err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			if err != nil {
				return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
			}
		}
	}
	// Before Linux 4.3 there is no ambient set (EINVAL): nothing to clear.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	data = [2]unix.CapUserData{}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
