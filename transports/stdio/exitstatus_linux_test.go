package stdio

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/transports"
)

// A server whose stdout ends because it exited is reported by how it
// ended, however long its exit status takes to arrive. Here the status
// waits for a confined server's last words: a grandchild holds its stderr
// for 2 s, longer than the reader's first wait for the status. Before,
// the reader gave up after that wait and reported a server that "closed
// its stdout but is still running"; on a loaded machine a slow reap did
// the same to an ordinary exit (the flake of
// TestDeadProcessFailsInFlightCallsAndIsRestartedAtOnce).
func TestAnExitWhoseStatusIsSlowIsReportedAsTheExit(t *testing.T) {
	cfg := sh(`sleep 2 </dev/null >/dev/null & exit 7`)
	cfg.Sandbox = &transports.Sandbox{Enabled: true, Mechanism: transports.SandboxLandlock}
	_, rec := dial(t, cfg, Options{})
	err := rec.waitClosed(t)
	var pe *ProcessExitError
	require.ErrorAs(t, err, &pe, "the end of stdout says how the server ended: %v", err)
	assert.Equal(t, 7, pe.ExitCode)
}
