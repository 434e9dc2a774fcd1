//go:build unix

package oauth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// flockPoll is how often a held flock is retried.
const flockPoll = 10 * time.Millisecond

// flock takes an exclusive flock on path (created 0600), polling so that
// ctx can end the wait. Locks are per open file, so two stores in one
// process exclude each other as two processes do.
func flock(ctx context.Context, path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("oauth store lock: %w", err)
	}
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("oauth store lock: %w", err)
	}
	t := time.NewTicker(flockPoll)
	defer t.Stop()
	for {
		err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			var once sync.Once
			return func() {
				once.Do(func() {
					_ = syscall.Flock(int(fh.Fd()), syscall.LOCK_UN)
					_ = fh.Close()
				})
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			fh.Close()
			return nil, fmt.Errorf("oauth store lock: %w", err)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			fh.Close()
			return nil, ctx.Err()
		}
	}
}
