// Package filelock takes exclusive locks on files that hold across
// processes: flock(2) on Unix, LockFileEx on Windows. A lock belongs to
// the open file it was taken through, so two users in one process
// exclude each other as two processes do. Lock files hold no data; they
// are created owner-only.
package filelock

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/owneronly"
)

// poll is how often a held lock is retried while Lock waits.
const poll = 10 * time.Millisecond

// Lock takes the exclusive lock of path (created if missing, with its
// directory), waiting until it is free or ctx ends. The returned unlock
// releases it; calling it again does nothing.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	if err := owneronly.MkdirAll(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		held, err := tryLock(fh)
		if err != nil {
			fh.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if held {
			var once sync.Once
			return func() {
				once.Do(func() {
					unlockFile(fh)
					fh.Close()
				})
			}, nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			fh.Close()
			return nil, ctx.Err()
		}
	}
}
