//go:build unix

package trust

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockPoll is how often a held lock is tried again.
const lockPoll = 10 * time.Millisecond

// lockFile takes an exclusive flock on path (created 0600), trying again
// every lockPoll until ctx ends. Locks belong to the open file, so two
// Stores in one process exclude each other as two processes do.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("trust: lock: %w", err)
	}
	var t *time.Ticker
	for {
		err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			if t != nil {
				t.Stop()
			}
			return func() {
				_ = syscall.Flock(int(fh.Fd()), syscall.LOCK_UN)
				_ = fh.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			fh.Close()
			return nil, fmt.Errorf("trust: lock: %w", err)
		}
		if t == nil {
			t = time.NewTicker(lockPoll)
			defer t.Stop()
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			fh.Close()
			return nil, fmt.Errorf("trust: waiting for the lock: %w", ctx.Err())
		}
	}
}
