//go:build !windows

package stdio

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

// Several servers write to stderr at once: each one's ring holds its own
// lines, whole and in order, also when a server writes more than one
// read takes (on Linux all of them are read by one poller goroutine).
func TestStderrOfManyServersIsKeptApart(t *testing.T) {
	const servers, lines = 8, 400 // 400 lines of ~40 bytes: several reads
	conns := make([]*Conn, servers)
	recs := make([]*recorder, servers)
	for i := range conns {
		script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "server %d line $i ........................" >&2; i=$((i+1)); done; exit 0`, lines, i)
		conns[i], recs[i] = dial(t, sh(script), Options{})
	}
	for i, rec := range recs {
		err := rec.waitClosed(t)
		var pe *ProcessExitError
		require.ErrorAs(t, err, &pe)
		all := string(conns[i].errlog.Bytes())
		got := strings.Split(strings.TrimRight(all, "\n"), "\n")
		require.Len(t, got, lines, "server %d: every stderr line kept", i)
		for j, l := range got {
			require.Equal(t, fmt.Sprintf("server %d line %d ........................", i, j), l, "server %d line %d", i, j)
		}
		assert.Contains(t, pe.Stderr, fmt.Sprintf("server %d line %d", i, lines-1), "the exit error quotes the last line")
	}
}

// A grandchild that keeps the server's stderr open does not keep Close
// from ending the reading of it, and the ring still has what was written.
func TestCloseEndsStderrHeldByAGrandchild(t *testing.T) {
	c, _ := dial(t, sh(`echo "hello from stderr" >&2; sleep 1000 & cat >/dev/null`), Options{})
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(c.StderrTail(5), "hello from stderr") {
		require.True(t, time.Now().Before(deadline), "the stderr line did not reach the ring within 10 s")
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, c.Close(testwait.Context(t)))
	testwait.Done(t, c.stderrDone, "the end of the stderr reading after Close")
	assert.Empty(t, stdiotest.WaitGroupGone(c.Pid(), 2*time.Second))
}
