package sandbox

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mcpvisor/mcpvisor/transports"
)

// Enter confines the calling process by the plan and executes the plan's
// command in its place; it returns only when that failed. It is the exec
// stage's whole work (see package reaper), and must run in a process of
// its own: it locks the calling goroutine to its thread for good, sets
// the process's resource limits and, for Landlock, restricts the thread
// and then executes from it, so that the new program inherits the
// restriction and no other thread of this process ever had it.
//
// An error matches ErrUnavailable when the sandbox itself failed; an
// exec failure wraps the syscall.Errno (fs.ErrNotExist for ENOENT).
func Enter(p *Plan, env []string) error {
	runtime.LockOSThread() // never unlocked: the thread is the sandbox's
	if err := setLimits(p.Limits); err != nil {
		return &UnavailableError{Requested: p.Mechanism, Reasons: []string{err.Error()}}
	}
	if p.Mechanism == transports.SandboxLandlock {
		if p.Landlock == nil {
			return &UnavailableError{Requested: p.Mechanism, Reasons: []string{"the plan has no ruleset"}}
		}
		// No setuid binary may lift the restriction (Landlock demands
		// it of an unprivileged caller).
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return &UnavailableError{Requested: p.Mechanism, Reasons: []string{"prctl(PR_SET_NO_NEW_PRIVS): " + err.Error()}}
		}
		if err := applyLandlock(p.Landlock); err != nil {
			return &UnavailableError{Requested: p.Mechanism, Reasons: []string{err.Error()}}
		}
	}
	err := syscall.Exec(p.Path, p.Argv, env)
	return &os.PathError{Op: "exec", Path: p.Path, Err: err}
}

// setLimits sets the resource limits (soft and hard: the server cannot
// raise them again).
func setLimits(l Limits) error {
	set := func(name string, res int, v uint64) error {
		if v == 0 {
			return nil
		}
		// syscall.Setrlimit, not unix's: for RLIMIT_NOFILE it also stops
		// the runtime from restoring its own limit on exec.
		if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("setrlimit(%s, %d): %w", name, v, err)
		}
		return nil
	}
	if err := set("RLIMIT_DATA", unix.RLIMIT_DATA, l.DataBytes); err != nil {
		return err
	}
	if err := set("RLIMIT_NOFILE", unix.RLIMIT_NOFILE, l.OpenFiles); err != nil {
		return err
	}
	if l.Processes > 0 && os.Getuid() != 0 { // root is not held by RLIMIT_NPROC
		// RLIMIT_NPROC counts every process of the user: allow the
		// server this many more than the user has now.
		if err := set("RLIMIT_NPROC", unix.RLIMIT_NPROC, uint64(userProcesses())+l.Processes); err != nil {
			return err
		}
	}
	return nil
}

// userProcesses counts this user's tasks (RLIMIT_NPROC counts threads)
// in /proc.
func userProcesses() int {
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	uid := uint32(os.Getuid())
	n := 0
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		if _, err := strconv.Atoi(name); err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+name, &st) != nil || st.Uid != uid {
			continue
		}
		if t, err := os.ReadDir("/proc/" + name + "/task"); err == nil {
			n += len(t)
		} else {
			n++
		}
	}
	return n
}
