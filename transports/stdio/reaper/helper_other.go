//go:build !linux

package reaper

import (
	"fmt"
	"os"
	"runtime"
)

// runHelper: there are no helper modes on this platform.
func runHelper(mode string, args []string) int {
	fmt.Fprintf(os.Stderr, "mcpvisor-helper %s: not supported on %s\n", mode, runtime.GOOS)
	return 2
}

func exit(code int) { os.Exit(code) }
