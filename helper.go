package mcpvisor

import (
	"github.com/mcpvisor/mcpvisor/transports/stdio/reaper"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
)

// HelperMain runs this process as mcpvisor's process helper when it was
// started as one, and exits; otherwise it returns at once. Every program
// that starts stdio servers through mcpvisor calls it first thing in
// main, and test packages that do call it first thing in TestMain:
//
//	func main() {
//		mcpvisor.HelperMain()
//		…
//	}
//
//	func TestMain(m *testing.M) {
//		mcpvisor.HelperMain()
//		os.Exit(m.Run())
//	}
//
// The helper is this same binary started again with other arguments
// (argv[0] "mcpvisor-helper", never an environment variable): on Linux a
// reaper that starts every stdio server, so that nothing a server starts
// outlives the program even when it is killed with SIGKILL, and the exec
// stage that confines a sandboxed server before it runs. Until
// HelperMain has run, a stdio server fails to start with
// ErrHelperNotInstalled rather than run without that guarantee. See
// docs/processes.md.
func HelperMain() { reaper.HelperMain() }

// ErrHelperNotInstalled: a stdio server was not started because the
// program's main did not call HelperMain. It is a config failure (the
// server is parked in failed).
var ErrHelperNotInstalled = reaper.ErrNotInstalled

// ErrSandboxUnavailable is matched by the error of a server whose
// sandbox could not be had: no mechanism works here, the one named is
// missing or disabled, or applying it failed. The server never ran.
var ErrSandboxUnavailable = sandbox.ErrUnavailable
