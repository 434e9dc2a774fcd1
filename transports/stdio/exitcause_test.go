//go:build !windows

package stdio

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
)

// A server that exits closes its stdin before the reader reports the
// exit, and a write in between meets a broken pipe. The write's error
// then says how the process ended, as the reader's does: which of the two
// reports first must not change the error of the calls in flight (it did
// in TestDeadProcessFailsInFlightCallsAndIsRestartedAtOnce, a few runs in
// a hundred).
func TestSendToAnExitedServerSaysHowItEnded(t *testing.T) {
	c, rec := dial(t, sh(`exec 0<&-; exit 7`), Options{})
	var readerSaw *ProcessExitError
	require.ErrorAs(t, rec.waitClosed(t), &readerSaw)

	err := c.Send(testwait.Context(t), []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	require.ErrorIs(t, err, transports.ErrClosed)
	var pe *ProcessExitError
	require.ErrorAs(t, err, &pe, "the write's error says how the process ended: %v", err)
	assert.Equal(t, 7, pe.ExitCode)
	assert.Contains(t, err.Error(), "broken pipe", "and what the write met")
	assert.Equal(t, err, c.Send(testwait.Context(t), []byte(`{}`)), "later sends fail alike")
}

// A server that closes its stdin and runs on has no exit to report: the
// write fails with the pipe's error.
func TestSendToAServerThatClosedItsStdin(t *testing.T) {
	c, rec := dial(t, sh(`exec 0<&-; echo {}; exec sleep 30`), Options{CloseStdinTimeout: 10 * time.Millisecond, TerminateTimeout: 10 * time.Millisecond})
	rec.waitFrames(t, 1) // stdin is closed
	err := c.Send(testwait.Context(t), []byte(`{}`))
	require.ErrorIs(t, err, transports.ErrClosed)
	var pe *ProcessExitError
	assert.False(t, errors.As(err, &pe), "no exit to report: %v", err)
	assert.Contains(t, err.Error(), "broken pipe")
}
