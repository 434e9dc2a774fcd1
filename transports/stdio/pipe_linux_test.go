package stdio

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	raw, err := f.SyscallConn()
	require.NoError(t, err)
	var flags int
	var ferr error
	require.NoError(t, raw.Control(func(fd uintptr) {
		var errno syscall.Errno
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		flags, errno = int(r), e
		if errno != 0 {
			ferr = errno
		}
	}))
	require.NoError(t, ferr)
	return flags&syscall.O_NONBLOCK != 0
}

// The parent's end of a server pipe honours deadlines (it is pollable);
// the child's is the plain blocking descriptor a server expects on its
// stdio.
func TestPipeEnds(t *testing.T) {
	for _, parentReads := range []bool{true, false} {
		parent, child, err := pipe(parentReads)
		require.NoError(t, err)
		assert.True(t, nonblocking(t, parent), "parentReads=%v: the parent's end is non-blocking", parentReads)
		assert.False(t, nonblocking(t, child), "parentReads=%v: the child's end is blocking", parentReads)
		if parentReads {
			require.NoError(t, parent.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
			_, err := parent.Read(make([]byte, 1))
			assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "a read with nothing to read ends at its deadline")
			_, err = child.Write([]byte("x"))
			require.NoError(t, err)
			require.NoError(t, parent.SetReadDeadline(time.Time{}))
			b := make([]byte, 1)
			_, err = parent.Read(b)
			require.NoError(t, err)
			assert.Equal(t, "x", string(b))
		} else {
			require.NoError(t, parent.SetWriteDeadline(time.Now().Add(-time.Second)))
			_, err := parent.Write([]byte("x"))
			assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "a write past its deadline fails")
		}
		require.NoError(t, parent.Close())
		require.NoError(t, child.Close())
	}
}
