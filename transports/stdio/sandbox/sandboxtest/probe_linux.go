//go:build linux

package sandboxtest

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// capabilities returns the Cap* lines of /proc/self/status: the
// inheritable, permitted, effective, bounding and ambient sets.
func capabilities() (string, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err.Error(), false
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Cap") {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(lines, "\n"), true
}

// rawSocket opens a raw ICMP socket (CAP_NET_RAW).
func rawSocket() (string, bool) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	if err != nil {
		return "raw socket: " + err.Error(), false
	}
	unix.Close(fd)
	return "raw socket opened", true
}

// signal sends SIGCONT (harmless) to pid.
func signal(pid int) (string, bool) {
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return fmt.Sprintf("signal %d: %v", pid, err), false
	}
	return fmt.Sprintf("signalled %d", pid), true
}

// unmount detaches the mount at path (CAP_SYS_ADMIN in the mount
// namespace's owner).
func unmount(path string) (string, bool) {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
		return "unmount " + path + ": " + err.Error(), false
	}
	return "unmounted " + path, true
}
