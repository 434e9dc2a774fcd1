//go:build unix

package filelock

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes flock(LOCK_EX) on fh without waiting; false when another
// open file holds it.
func tryLock(fh *os.File) (bool, error) {
	err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
		return false, nil
	}
	return false, err
}

func unlockFile(fh *os.File) { _ = syscall.Flock(int(fh.Fd()), syscall.LOCK_UN) }
