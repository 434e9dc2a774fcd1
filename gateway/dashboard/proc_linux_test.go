//go:build linux

package dashboard_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

// childPIDs lists the processes below this one whose command line contains
// arg (Linux /proc). Servers are children of the process helper (the
// reaper), itself a child of this process.
func childPIDs(arg string) []int {
	var out []int
	for _, p := range stdiotest.Descendants(os.Getpid()) {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.Pid), "cmdline"))
		if !strings.Contains(string(cmdline), "\x00"+arg+"\x00") && !strings.HasSuffix(string(cmdline), "\x00"+arg) {
			continue
		}
		out = append(out, p.Pid)
	}
	return out
}

// serverPIDOrZero returns the PID of the mock server started with -name
// name, or 0.
func serverPIDOrZero(_ *mcpvisor.Supervisor, name string) int {
	for _, pid := range childPIDs(name) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			return pid
		}
	}
	return 0
}
