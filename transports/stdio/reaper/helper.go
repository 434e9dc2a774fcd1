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

// ErrNotInstalled means the helper is not available in this process, so
// a server cannot be started with the guarantee that nothing it starts
// outlives the host. The package's init installs it in every program
// that links it; only a test that withdraws it meets this error.
var ErrNotInstalled = errors.New("mcpvisor: the process helper is not installed; see docs/processes.md")

// ErrHelperDied means the reaper process ended while the host still ran
// (someone killed it). Its servers were killed with it (they have a
// parent-death signal); a new one is started for the next server.
var ErrHelperDied = errors.New("mcpvisor: the process helper ended unexpectedly")

// installed is set by this package's init when the process is not a
// helper (and again by HelperMain).
var installed atomic.Bool

// init runs this process as a helper when its arguments say it was
// started as one, before the host's main and before any init of a
// package that imports this one: a host need not call anything for its
// stdio servers to start. Any other process returns at once, and Spawn
// may start servers from then on.
func init() { serveIfHelper() }

// serveIfHelper runs the helper mode named by the arguments and exits,
// or marks the helper installed.
func serveIfHelper() {
	if len(os.Args) >= 2 && os.Args[0] == helperArg0 {
		exit(runHelper(os.Args[1], os.Args[2:]))
	}
	installed.Store(true)
}

// HelperMain is kept for hosts written before the helper ran from this
// package's init: the helper modes are served before main now, so it
// only returns. Calling it first thing in main (or TestMain) stays
// correct.
//
// The mode is selected by the arguments only (argv[0] "mcpvisor-helper"
// and argv[1] the mode), never by the environment.
func HelperMain() { serveIfHelper() }

// Installed reports whether this process may start servers: it is not a
// helper, and this package's init has run.
func Installed() bool { return installed.Load() }
