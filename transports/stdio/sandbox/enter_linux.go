package sandbox

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

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
	// Everything execve needs is allocated before the limits: once the
	// data limit is set, this process (a Go runtime, with the race
	// detector's shadow memory in tests) may not be able to allocate.
	path, err := syscall.BytePtrFromString(p.Path)
	if err != nil {
		return &os.PathError{Op: "exec", Path: p.Path, Err: err}
	}
	argv, err := syscall.SlicePtrFromStrings(p.Argv)
	if err != nil {
		return &os.PathError{Op: "exec", Path: p.Path, Err: err}
	}
	envv, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return &os.PathError{Op: "exec", Path: p.Path, Err: err}
	}
	limits, err := rlimits(p.Limits)
	if err != nil {
		return &UnavailableError{Requested: p.Mechanism, Reasons: []string{err.Error()}}
	}
	for _, l := range limits {
		if _, _, errno := syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(l.resource), uintptr(unsafe.Pointer(&l.value)), 0, 0, 0); errno != 0 {
			return &UnavailableError{Requested: p.Mechanism, Reasons: []string{fmt.Sprintf("setrlimit(%s, %d): %v", l.name, l.value.Cur, errno)}}
		}
	}
	_, _, errno := syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(path)),
		uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	return &os.PathError{Op: "exec", Path: p.Path, Err: errno}
}

// rlimit is one resource limit to set.
type rlimit struct {
	name     string
	resource int
	value    syscall.Rlimit
}

// rlimits lists the limits to set (soft and hard alike, so that the
// server cannot raise them again), each no higher than the present hard
// limit. The data limit comes last.
func rlimits(l Limits) ([]rlimit, error) {
	var out []rlimit
	add := func(name string, res int, v uint64) error {
		if v == 0 {
			return nil
		}
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(res, &cur); err != nil {
			return fmt.Errorf("getrlimit(%s): %w", name, err)
		}
		v = min(v, cur.Max)
		out = append(out, rlimit{name: name, resource: res, value: syscall.Rlimit{Cur: v, Max: v}})
		return nil
	}
	if l.Processes > 0 && os.Getuid() != 0 { // root is not held by RLIMIT_NPROC
		// RLIMIT_NPROC counts every task of the user: allow the server
		// this many more than the user has now.
		if err := add("RLIMIT_NPROC", unix.RLIMIT_NPROC, uint64(userProcesses())+l.Processes); err != nil {
			return nil, err
		}
	}
	if err := add("RLIMIT_NOFILE", unix.RLIMIT_NOFILE, l.OpenFiles); err != nil {
		return nil, err
	}
	if err := add("RLIMIT_DATA", unix.RLIMIT_DATA, l.DataBytes); err != nil {
		return nil, err
	}
	return out, nil
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
