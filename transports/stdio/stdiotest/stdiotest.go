// Package stdiotest helps tests check that stdio servers leave nothing
// behind.
package stdiotest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// GroupMembers returns the pids of the live (not zombie) processes whose
// process group is pgid, read from /proc. A zombie is not counted: it runs
// nothing, and reaping a reparented one is its new parent's job.
func GroupMembers(pgid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, stat := range dirs {
		b, err := os.ReadFile(stat)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(b[i+1:])
		if len(fields) < 3 || string(fields[0]) == "Z" || string(fields[0]) == "X" {
			continue
		}
		if g, err := strconv.Atoi(string(fields[2])); err == nil && g == pgid {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(stat)))
			pids = append(pids, pid)
		}
	}
	return pids
}

// WaitGroupGone polls until no live process is left in group pgid or the
// timeout passes, and returns the survivors (nil when none).
func WaitGroupGone(pgid int, timeout time.Duration) []int {
	deadline := time.Now().Add(timeout)
	for {
		left := GroupMembers(pgid)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}
