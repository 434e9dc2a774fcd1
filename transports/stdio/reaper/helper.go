package reaper

import (
	"errors"
	"os"
	"sync/atomic"

	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox/confine"
)

// helperArg0 is the argv[0] of the host binary re-executed as a helper;
// argv[1] names the mode.
const helperArg0 = confine.Arg0

// The helper modes.
const (
	modeReaper = "reaper"         // the long-lived reaper; its socket is descriptor 3
	modeExec   = confine.ModeExec // the exec stage (package confine, run from its init); status pipe on descriptor 3
)

// ErrNotInstalled means HelperMain has not run in this process, so a
// server cannot be started with the guarantee that nothing it starts
// outlives the host. The message says what to do.
var ErrNotInstalled = errors.New("mcpvisor: the process helper is not installed: call mcpvisor.HelperMain() " +
	"first thing in main (and in TestMain of tests that start stdio servers); see docs/processes.md")

// ErrHelperDied means the reaper process ended while the host still ran
// (someone killed it). Its servers were killed with it (they have a
// parent-death signal); a new one is started for the next server.
var ErrHelperDied = errors.New("mcpvisor: the process helper ended unexpectedly")

// installed is set by HelperMain when the process is not a helper.
var installed atomic.Bool

// HelperMain runs this process as mcpvisor's process helper when its
// arguments say it was started as one (the reaper, or a server's exec
// stage), and then exits; otherwise it returns at once, and from then on
// Spawn may start servers. Call it first thing in main, before anything
// that starts goroutines or reads the command line, and in TestMain of
// test packages that start stdio servers:
//
//	func main() {
//		mcpvisor.HelperMain()
//		…
//	}
//
// The mode is selected by the arguments only (argv[0] "mcpvisor-helper"
// and argv[1] the mode), never by the environment.
func HelperMain() {
	if len(os.Args) >= 2 && os.Args[0] == helperArg0 {
		exit(runHelper(os.Args[1], os.Args[2:]))
	}
	installed.Store(true)
}

// Installed reports whether HelperMain has run in this process (and
// returned: this process is not a helper).
func Installed() bool { return installed.Load() }
