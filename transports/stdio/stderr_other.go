//go:build !linux

package stdio

import (
	"os"

	"github.com/mcpvisor/mcpvisor/internal/routine"
)

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
