package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// Landlock access rights, as this package groups them.
const (
	// llRead: read files, list directories, execute.
	llRead = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// llDevice: use a character device (/dev/null, a terminal).
	llDevice = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	// llNoWrite are the rights a writable path still does not get:
	// creating device nodes, and ioctls on devices.
	llNoWrite = unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// landlockABI returns the kernel's Landlock ABI version (0: none).
var landlockABI = sync.OnceValue(func() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
})

// handledFS is every filesystem right the ABI knows: all are denied but
// where a rule grants them.
func handledFS(abi int) uint64 {
	h := uint64(unix.LANDLOCK_ACCESS_FS_MAKE_SYM<<1 - 1) // ABI 1: execute … make_sym
	if abi >= 2 {
		h |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		h |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		h |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return h
}

// checkLandlock reports whether Landlock can confine a server with
// these settings.
func checkLandlock(network bool) error {
	abi := landlockABI()
	switch {
	case abi == 0:
		return errors.New("the kernel has no Landlock (Linux 5.13+, with landlock in the lsm= list)")
	case !network && abi < 4:
		return fmt.Errorf("Landlock ABI %d cannot deny TCP (needs ABI 4, Linux 6.7); set \"network\": true or use bwrap", abi)
	}
	return nil
}

// devices are the character devices (and device directories) a confined
// server may use; the rest of /dev is hidden.
var devices = []struct {
	path   string
	access uint64
}{
	{"/dev/null", llDevice}, {"/dev/zero", llDevice}, {"/dev/full", llDevice},
	{"/dev/random", llDevice}, {"/dev/urandom", llDevice}, {"/dev/tty", llDevice},
	{"/dev/ptmx", llDevice}, {"/dev/pts", llDevice | unix.LANDLOCK_ACCESS_FS_READ_DIR},
	// /dev/fd and /dev/std* lead into /proc, which is readable.
}

// landlockRuleset lists the rules of a server's Landlock domain:
// everything readable but the hidden places (the home directory, the
// directory of the servers' private temporary directories, /dev), then
// inside them what the server may see, and its writable paths.
func landlockRuleset(v view, tempDir string, network bool) *Ruleset {
	abi := landlockABI()
	handled := handledFS(abi)
	rs := &Ruleset{HandledFS: handled}
	if !network {
		rs.HandledNet = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if abi >= 6 {
		// Signals only to processes of the server's own domain (not the
		// supervisor, not the user's other programs).
		rs.Scoped = unix.LANDLOCK_SCOPE_SIGNAL
		if !network {
			rs.Scoped |= unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		}
	}
	hidden := []string{"/dev"}
	if v.home != "" && v.home != "/" {
		hidden = append(hidden, v.home)
	}
	if tempDir != "" && !inside(tempDir, v.home) {
		hidden = append(hidden, filepath.Dir(tempDir))
	}
	add := func(path string, access uint64) {
		rs.Rules = append(rs.Rules, Rule{Path: path, Access: access & handled})
	}
	complement("/", hidden, func(p string) { add(p, llRead) })
	for _, d := range devices {
		add(d.path, d.access)
	}
	for _, p := range v.read {
		add(p, llRead)
	}
	for _, p := range v.write {
		add(p, handled&^llNoWrite)
	}
	if tempDir != "" {
		add(tempDir, handled&^llNoWrite)
	}
	return rs
}

// complement calls grant for every entry below dir that is neither one of
// the hidden paths nor holds one, descending into those that hold one. A
// symbolic link that leads into a hidden path is not granted.
func complement(dir string, hidden []string, grant func(string)) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
entries:
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		for _, h := range hidden {
			switch {
			case p == h:
				continue entries
			case within(h, p):
				complement(p, hidden, grant)
				continue entries
			}
		}
		if e.Type()&os.ModeSymlink != 0 {
			r, err := filepath.EvalSymlinks(p)
			if err != nil {
				continue
			}
			for _, h := range hidden {
				if inside(r, h) || within(h, r) {
					continue entries
				}
			}
		}
		grant(p)
	}
}
