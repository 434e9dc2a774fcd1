//go:build !unix

package transports

import (
	"io"
	"syscall"
)

// pollable returns nil: on Windows a pipe's handle cannot report "no data
// yet" to the runtime's poller (os.Pipe makes synchronous handles), so a
// LineReader there keeps its buffer while it blocks in Read.
func pollable(io.Reader) syscall.RawConn { return nil }

// fillRaw is never called without a RawConn.
func (lr *LineReader) fillRaw() { lr.fillBlocking() }
