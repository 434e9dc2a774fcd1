// Package reaper starts stdio servers so that nothing they start outlives
// the program that supervises them, not even when that program is killed
// with SIGKILL.
//
// One helper process per supervising process (the reaper: the host's own
// binary, re-executed in a helper mode selected by its arguments) starts
// every server on the host's behalf. The host hands it the server's
// stdin, stdout and stderr over a unix socket (SCM_RIGHTS); the reaper
// starts the server in a process group of its own with a parent-death
// signal, and reports its exit back over the socket. The reaper is a
// child subreaper (PR_SET_CHILD_SUBREAPER): whatever a server leaves
// behind, even a grandchild that called setsid and whose parent died, is
// reparented to the reaper rather than to init. When the host dies, the
// kernel closes its end of the socket; the reaper sees end-of-file,
// SIGKILLs every process below it (found by walking /proc parent links,
// and by the servers' cgroups where it could make them), reaps them and
// exits. See docs/processes.md for the design, its measurements and what
// it does not cover.
//
// Where a cgroup v2 hierarchy is writable, each server also gets a cgroup
// of its own (created with CLONE_INTO_CGROUP, so no descendant escapes
// it): stopping one server then ends every process it started, however
// detached. Without one, a stop ends the server's process group and
// every descendant it had when the stop began; a detached process whose
// parent had already died is attributed to no server and lives until the
// reaper ends (when the host closes its supervisor, or dies).
//
// A host enables the helper with one line at the top of main (and of
// TestMain in tests that start stdio servers):
//
//	func main() {
//		mcpvisor.HelperMain() // returns at once unless this process is mcpvisor's helper
//		…
//	}
//
// Until HelperMain has run, Spawn fails with ErrNotInstalled: a server is
// never started without the guarantee.
//
// The same helper mode confines a server before it runs (see package
// sandbox): the reaper starts the host binary once more as an exec stage
// that sets the server's resource limits and Landlock rules on itself and
// then executes the server (or bubblewrap), so that the limits hold from
// the server's first instruction.
package reaper
