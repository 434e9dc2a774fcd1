//go:build !unix

package oauth

import (
	"context"
	"sync"
)

// flockMu stands in for flock where there is none: it excludes this
// process's users of the store only.
var flockMu = map[string]chan struct{}{}
var flockMuLock sync.Mutex

func flock(ctx context.Context, path string) (func(), error) {
	flockMuLock.Lock()
	ch, ok := flockMu[path]
	if !ok {
		ch = make(chan struct{}, 1)
		flockMu[path] = ch
	}
	flockMuLock.Unlock()
	select {
	case ch <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-ch }) }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
