//go:build linux

package gateway_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mcpvisor/mcpvisor"
)

// childPIDs lists this process's children whose command line contains
// arg (Linux /proc).
func childPIDs(arg string) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		dir := filepath.Dir(p)
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		if !strings.Contains(string(cmdline), "\x00"+arg+"\x00") && !strings.HasSuffix(string(cmdline), "\x00"+arg) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		out = append(out, pid)
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
