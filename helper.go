package mcpvisor

import (
	"github.com/mcpvisor/mcpvisor/transports/stdio/reaper"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
)

// HelperMain is kept for hosts written when the helper had to be
// started from main; it returns at once, and calling it first thing in
// main or TestMain stays correct. A host needs no call at all: the
// helper is this same binary started again with other arguments
// (argv[0] "mcpvisor-helper", never an environment variable), and the
// package that starts it (transports/stdio/reaper) recognises those
// arguments in its init, before the host's main runs, serves the helper
// and exits. On Linux the helper is a reaper that starts every stdio
// server, so that nothing a server starts outlives the program even when
// it is killed with SIGKILL, and the exec stage that confines a
// sandboxed server before it runs. See docs/processes.md.
func HelperMain() { reaper.HelperMain() }

// ErrHelperNotInstalled: a stdio server was not started because the
// process helper was not available (only a test that withdraws it meets
// this). It is a config failure (the server is parked in failed).
var ErrHelperNotInstalled = reaper.ErrNotInstalled

// ErrSandboxUnavailable is matched by the error of a server whose
// sandbox could not be had: no mechanism works here, the one named is
// missing or disabled, or applying it failed. The server never ran.
var ErrSandboxUnavailable = sandbox.ErrUnavailable
