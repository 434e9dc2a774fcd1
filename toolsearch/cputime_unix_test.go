//go:build unix

package toolsearch

import "syscall"

// processCPU is the CPU time the process has used, user and system, in
// nanoseconds: benchmarks report it per operation beside wall time, which
// a loaded machine inflates.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
