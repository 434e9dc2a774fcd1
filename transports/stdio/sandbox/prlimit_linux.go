package sandbox

import (
	"os"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox/confine"
)

// prlimitPaths are where util-linux installs prlimit(1). They are fixed
// paths, not a PATH lookup: the program sets the limits of a confined
// server and must be the system's, and visible inside bubblewrap (which
// binds the whole system read-only, not the home directory).
var prlimitPaths = []string{"/usr/bin/prlimit", "/bin/prlimit"}

// findPrlimit returns util-linux's prlimit, or "" when it is not
// installed (then the exec stage sets the limits). Looked up once.
var findPrlimit = sync.OnceValue(func() string {
	for _, p := range prlimitPaths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
})

// direct makes the plan one the process helper starts itself: prlimit
// sets the limits and executes the server, inside bubblewrap (whose
// command it becomes) or, with Landlock, from the helper's thread that
// the ruleset confines. The exec stage, a start of the host binary
// (2-3 ms of CPU), is not needed.
func direct(plan *Plan, prlimit string) {
	limits := prlimitArgs(prlimit, plan.Limits)
	switch plan.Mechanism {
	case transports.SandboxBwrap:
		// bwrap … -- server args  →  bwrap … -- prlimit … -- server args
		sep := slices.Index(plan.Argv, "--")
		argv := slices.Clone(plan.Argv[:sep+1])
		argv = append(argv, limits...)
		plan.Argv = append(argv, plan.Argv[sep+1:]...)
	default:
		plan.Argv = append(limits, append([]string{plan.Path}, plan.Argv[1:]...)...)
		plan.Path = prlimit
	}
	plan.Direct = true
}

// prlimitArgs is prlimit's command line up to "--": each limit soft and
// hard alike (so that the server cannot raise it), no higher than this
// process's hard limit (which the process helper, its child, inherited),
// the process limit counted from the user's present tasks, as the exec
// stage does (root is not held by RLIMIT_NPROC: none is set).
func prlimitArgs(prlimit string, l Limits) []string {
	args := []string{prlimit}
	add := func(flag string, res int, v uint64) {
		if v == 0 {
			return
		}
		var cur unix.Rlimit
		if unix.Getrlimit(res, &cur) == nil {
			v = min(v, cur.Max)
		}
		n := strconv.FormatUint(v, 10)
		args = append(args, "--"+flag+"="+n+":"+n)
	}
	if l.Processes > 0 && os.Getuid() != 0 {
		add("nproc", unix.RLIMIT_NPROC, uint64(confine.UserTasks())+l.Processes)
	}
	add("nofile", unix.RLIMIT_NOFILE, l.OpenFiles)
	add("data", unix.RLIMIT_DATA, l.DataBytes)
	return append(args, "--")
}
