//go:build unix

package stdio

import (
	"strings"
	"syscall"
)

// resourceLimit tells, from how a confined server died, which of its
// sandbox's limits it ran into ("" for none that can be told).
func resourceLimit(sig syscall.Signal, stderrTail string) string {
	switch sig {
	case syscall.SIGXCPU:
		return "cpu"
	case syscall.SIGXFSZ:
		return "file-size"
	}
	tail := strings.ToLower(stderrTail)
	for _, s := range outOfMemory {
		if strings.Contains(tail, s) {
			return "memory"
		}
	}
	for _, s := range outOfTasks {
		if strings.Contains(tail, s) {
			return "memory or processes"
		}
	}
	return ""
}

// outOfTasks are what runtimes print when a thread or process cannot be
// created: the data limit (a thread's stack) or the process limit.
var outOfTasks = []string{
	"pthread_create failed", "resource temporarily unavailable", "failed to create new os thread",
}

// oomSearchBytes is how much of the end of a confined server's stderr is
// searched for an out-of-memory report.
const oomSearchBytes = 32 << 10

// outOfMemory are what runtimes print when an allocation fails (Go,
// Node/V8, Python, C++, glibc), in lower case.
var outOfMemory = []string{
	"out of memory", "cannot allocate memory", "memoryerror", "std::bad_alloc",
	"allocation failed", "failed to reserve virtual memory",
}
