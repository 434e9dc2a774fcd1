package stdio

import (
	"os"

	"golang.org/x/sys/unix"
)

// awaitExit blocks until process pid has exited, without reaping it and
// without holding an OS thread: it waits for its pidfd to become readable
// in the runtime's poller. (cmd.Wait alone parks a thread in waitid(2)
// for the life of every server.) It returns false when it could not
// tell; the caller's cmd.Wait then waits the blocking way.
func awaitExit(pid int) bool {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	raw, err := f.SyscallConn()
	if err != nil {
		return false
	}
	exited := false
	err = raw.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		switch err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err {
		case nil:
			exited = info.Signo != 0 // zero: no state change yet
			return exited
		case unix.EINTR:
			return false
		default:
			return true // cannot tell
		}
	})
	return err == nil && exited
}
