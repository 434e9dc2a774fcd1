package stdio

import (
	"bufio"
	"os"

	"github.com/mcpvisor/mcpvisor/transports"
)

// stderrLineBuffer is the stderr read buffer of drainStderr; longer
// lines are kept in pieces.
const stderrLineBuffer = 4 << 10

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
