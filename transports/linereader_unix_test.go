//go:build unix

package transports_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Closing the file while the reader waits ends ReadSlice with an error
// (the poller's promise on Unix; a Windows pipe of os.Pipe blocks).
func TestLineReaderEndsWhenTheFileIsClosed(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer w.Close()
	lr := transports.NewLineReader(r, 16)
	done := make(chan error, 1)
	go func() { _, err := lr.ReadSlice(); done <- err }()
	r.Close()
	assert.ErrorIs(t, testwait.Recv(t, done, "ReadSlice to end when its file is closed"), os.ErrClosed)
}
