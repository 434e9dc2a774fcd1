//go:build unix

package transports

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// An idle pipe reader holds no buffer: it returns it to the pool before
// it parks, and borrows one again when bytes arrive.
func TestLineReaderParksWithoutABuffer(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()

	lr := NewLineReader(r, 1024)
	require.NotNil(t, lr.raw, "an *os.File pipe must be read through its RawConn")
	var heldWhileParked []bool
	lr.parked = func() {
		heldWhileParked = append(heldWhileParked, lr.buf != nil)
		if len(heldWhileParked) == 1 {
			w.Write([]byte("one\ntw"))
		} else {
			w.Write([]byte("o\n"))
		}
	}
	var line []byte
	testwait.Call(t, "the first line", func() { line, err = lr.ReadSlice() })
	require.NoError(t, err)
	assert.Equal(t, "one\n", string(line))
	testwait.Call(t, "the second line", func() { line, err = lr.ReadSlice() })
	require.NoError(t, err)
	assert.Equal(t, "two\n", string(line))
	require.NotEmpty(t, heldWhileParked)
	// The first park had nothing buffered; the second waited for the rest
	// of "two" and had to keep its first bytes.
	assert.Equal(t, []bool{false, true}, heldWhileParked)
}
