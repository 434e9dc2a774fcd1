//go:build !unix

package trust

import (
	"context"
	"fmt"
	"sync"
)

// locks stands in for flock where there is none: it excludes this
// process's users of a lock file only.
var (
	locksMu sync.Mutex
	locks   = map[string]chan struct{}{}
)

func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	locksMu.Lock()
	ch, ok := locks[path]
	if !ok {
		ch = make(chan struct{}, 1)
		locks[path] = ch
	}
	locksMu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("trust: waiting for the lock: %w", ctx.Err())
	}
}
