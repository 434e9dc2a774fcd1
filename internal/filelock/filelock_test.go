package filelock

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two opens of one lock file exclude each other (as two processes do),
// a waiter gives up with its context, and unlock lets the next one in.
func TestLockExcludesAnotherOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.lock")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	unlock, err := Lock(ctx, path)
	require.NoError(t, err)

	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	_, err = Lock(short, path)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the second open waits while the first holds the lock")

	got := make(chan error, 1)
	go func() {
		u, err := Lock(ctx, path)
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	unlock() // a second call does nothing
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the waiter did not get the lock after unlock")
	}
}
