//go:build !unix && !windows

package filelock

import (
	"os"
	"sync"
)

// held stands in for a system lock where there is none: it excludes this
// process's users of a path only.
var (
	heldMu sync.Mutex
	held   = map[string]bool{}
)

func tryLock(fh *os.File) (bool, error) {
	heldMu.Lock()
	defer heldMu.Unlock()
	if held[fh.Name()] {
		return false, nil
	}
	held[fh.Name()] = true
	return true, nil
}

func unlockFile(fh *os.File) {
	heldMu.Lock()
	delete(held, fh.Name())
	heldMu.Unlock()
}
