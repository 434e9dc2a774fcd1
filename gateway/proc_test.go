package gateway_test

import (
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
)

// serverPID returns the PID of the mock server started with -name name
// (Linux only: elsewhere the test is skipped).
func serverPID(t *testing.T, sup *mcpvisor.Supervisor, name string) int {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("finding a server's process reads /proc (Linux only)")
	}
	pid := serverPIDOrZero(sup, name)
	require.NotZero(t, pid, "no server process %q", name)
	return pid
}

// killProcess kills process pid (SIGKILL on Unix).
func killProcess(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
