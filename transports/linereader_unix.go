//go:build unix

package transports

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// pollable returns src's syscall.RawConn when it has one: a descriptor
// the runtime's poller can wait on without a buffer.
func pollable(src io.Reader) syscall.RawConn {
	if sc, ok := src.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			return raw
		}
	}
	return nil
}

// fillRaw reads once from the raw descriptor, borrowing the buffer only
// when the descriptor has bytes: "would block" returns it to the pool and
// parks in the poller.
func (lr *LineReader) fillRaw() {
	var n int
	var rerr error
	err := lr.raw.Read(func(fd uintptr) bool {
		lr.borrow()
		n, rerr = syscall.Read(int(fd), (*lr.buf)[lr.w:])
		if rerr == syscall.EAGAIN {
			lr.release()
			return false // park in the poller with no buffer held
		}
		return rerr != syscall.EINTR
	})
	switch {
	case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
		lr.err = os.ErrClosed // the file was closed, as *os.File.Read says it
	case err != nil:
		lr.err = err
	case rerr != nil:
		lr.err = &pathlessError{rerr}
	case n == 0:
		lr.err = io.EOF
	default:
		lr.w += n
	}
	if lr.err != nil && lr.w == 0 {
		lr.release()
	}
}

// pathlessError is a read error of the raw descriptor (n < 0 from read(2)).
type pathlessError struct{ errno error }

func (e *pathlessError) Error() string { return "read: " + e.errno.Error() }
func (e *pathlessError) Unwrap() error { return e.errno }
