package confine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// init runs the exec stage when this process was started as one.
func init() {
	if len(os.Args) >= 2 && os.Args[0] == Arg0 && os.Args[1] == ModeExec {
		syscall.Exit(stage(os.Args[2:])) // not os.Exit: a race-enabled binary would wait a second
	}
}

// stage applies the plan in args[0] and executes its command; it returns
// an exit code only when that failed, having written a Report to
// descriptor 3.
func stage(args []string) int {
	runtime.LockOSThread() // never unlocked: Landlock restricts this thread, which executes the server
	status := os.NewFile(3, "status")
	if status == nil {
		fmt.Fprintf(os.Stderr, "%s %s: not started by mcpvisor\n", Arg0, ModeExec)
		return 2
	}
	syscall.CloseOnExec(3)
	report := func(r Report) int {
		b, _ := json.Marshal(r)
		status.Write(b)
		return 127
	}
	if len(args) != 1 {
		return report(Report{Kind: KindSandbox, Err: fmt.Sprintf("the exec stage takes one argument, got %d", len(args))})
	}
	var p Plan
	if err := json.Unmarshal([]byte(args[0]), &p); err != nil {
		return report(Report{Kind: KindSandbox, Err: "the exec stage's plan: " + err.Error()})
	}
	err := enter(&p, os.Environ())
	r := Report{Err: err.Error()}
	var se *sandboxError
	if errors.As(err, &se) {
		r.Kind = KindSandbox
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		r.Errno = int(errno)
	}
	return report(r)
}

// sandboxError is a failure of the sandbox itself.
type sandboxError struct{ msg string }

func (e *sandboxError) Error() string { return e.msg }

func sandboxErr(format string, args ...any) error {
	return &sandboxError{msg: fmt.Sprintf(format, args...)}
}

// enter confines this process by the plan and executes the plan's command
// in its place; it returns only when that failed.
func enter(p *Plan, env []string) error {
	switch {
	case p.Mechanism == "landlock":
		if err := Restrict(p); err != nil {
			return &sandboxError{msg: err.Error()}
		}
	case p.Mechanism == "bwrap" && p.NoNetwork:
		// bwrap installs the socket filter from a descriptor of ours
		// (left open across execve), which its argv names.
		fd, err := SocketFilterFile()
		if err != nil {
			return &sandboxError{msg: err.Error()}
		}
		if !setSeccompFD(p.Argv, fd) {
			return sandboxErr("the bubblewrap plan has no --seccomp")
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
		return &sandboxError{msg: err.Error()}
	}
	for _, l := range limits {
		if _, _, errno := syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(l.resource), uintptr(unsafe.Pointer(&l.value)), 0, 0, 0); errno != 0 {
			return sandboxErr("setrlimit(%s, %d): %v", l.name, l.value.Cur, errno)
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
	value    unix.Rlimit
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
		var cur unix.Rlimit
		if err := unix.Getrlimit(res, &cur); err != nil {
			return fmt.Errorf("getrlimit(%s): %w", name, err)
		}
		v = min(v, cur.Max)
		out = append(out, rlimit{name: name, resource: res, value: unix.Rlimit{Cur: v, Max: v}})
		return nil
	}
	if l.Processes > 0 && os.Getuid() != 0 { // root is not held by RLIMIT_NPROC
		// RLIMIT_NPROC counts every task of the user: allow the server
		// this many more than the user has now.
		if err := add("RLIMIT_NPROC", unix.RLIMIT_NPROC, uint64(UserTasks())+l.Processes); err != nil {
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

// Restrict confines the calling thread, and every process it starts from
// now on, by a Landlock plan: it sets no_new_privs (no setuid binary or
// file capability may lift the restriction; Landlock and seccomp demand
// it of an unprivileged caller), enforces the plan's Landlock domain,
// installs the socket filter when the plan has no network, and drops
// every capability (dropCapabilities). All of it holds for this thread
// only: the caller locks its goroutine to the thread and never unlocks
// it, so that the thread ends with the goroutine.
func Restrict(p *Plan) error {
	if p.Landlock == nil {
		return errors.New("the plan has no Landlock ruleset")
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := applyLandlock(p.Landlock); err != nil {
		return err
	}
	if p.NoNetwork {
		if err := installSocketFilter(); err != nil {
			return err
		}
	}
	return dropCapabilities()
}

// setSeccompFD writes fd as the value of argv's "--seccomp" (bubblewrap's
// options, before its "--"), reporting whether there was one.
func setSeccompFD(argv []string, fd int) bool {
	for i := 0; i+1 < len(argv) && argv[i] != "--"; i++ {
		if argv[i] == "--seccomp" {
			argv[i+1] = strconv.Itoa(fd)
			return true
		}
	}
	return false
}

// UserTasks counts this user's tasks (RLIMIT_NPROC counts threads) in
// /proc: the base of a server's process limit.
func UserTasks() int {
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

// rulesetAttr is struct landlock_ruleset_attr as of ABI 6 (the kernel
// takes a shorter or longer one, the rest zero). Declared here, not taken
// from x/sys, whose field names change between versions.
type rulesetAttr struct {
	handledFS  uint64
	handledNet uint64
	scoped     uint64
}

// pathBeneathAttr is struct landlock_path_beneath_attr (packed: the
// kernel reads 12 bytes).
type pathBeneathAttr struct {
	allowedAccess uint64
	parentFd      int32
}

// fileRights are the rights that apply to a file (not a directory); a
// rule on a file may grant no other.
const fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
	unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

// applyLandlock confines the calling thread (and what it executes) to
// the ruleset. The caller has locked its goroutine to the thread and set
// no_new_privs.
func applyLandlock(rs *Ruleset) error {
	attr := rulesetAttr{handledFS: rs.HandledFS, handledNet: rs.HandledNet, scoped: rs.Scoped}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	for _, r := range rs.Rules {
		if err := addPathRule(int(fd), r); err != nil {
			return err
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

// addPathRule adds one rule; a path that does not exist (or cannot be
// opened) is skipped: it grants nothing.
func addPathRule(ruleset int, r Rule) error {
	pfd, err := unix.Open(r.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil
	}
	access := r.Access
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= fileRights
	}
	if access == 0 {
		return nil
	}
	attr := pathBeneathAttr{allowedAccess: access, parentFd: int32(pfd)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_add_rule %s: %w", r.Path, errno)
	}
	return nil
}
