//go:build !linux

package stdio

import (
	"bufio"
	"os"

	"github.com/mcpvisor/mcpvisor/internal/routine"
	"github.com/mcpvisor/mcpvisor/transports"
)

// stderrLineBuffer is the stderr read buffer; longer lines are kept in
// pieces.
const stderrLineBuffer = 4 << 10

// openStderr makes the server's stderr pipe and starts a goroutine that
// copies its read end into the ring. It returns the child's end and
// stop, which closes the read end (the goroutine then ends and closes
// stderrDone).
func (c *Conn) openStderr() (child *os.File, stop func(), err error) {
	r, w, err := pipe(true)
	if err != nil {
		return nil, nil, err
	}
	routine.Go("stdio.stderr", func() { c.drainStderr(r) })
	return w, func() { r.Close() }, nil
}

// drainStderr copies stderr into the ring (and the log) until it ends.
func (c *Conn) drainStderr(r *os.File) {
	defer close(c.stderrDone)
	br := transports.NewLineReader(r, stderrLineBuffer)
	defer br.Close()
	for {
		line, err := br.ReadSlice()
		if len(line) > 0 {
			c.stderrWrite(line)
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}
