package stdio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/reaper"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

func treeTag(t *testing.T) (name, value string) {
	b := make([]byte, 8)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "MCPVISOR_TREE_TEST", hex.EncodeToString(b)
}

// inCgroup reports whether pid runs in a cgroup the process helper made.
func inCgroup(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	return err == nil && strings.Contains(string(b), "/mcpvisor-")
}

// Stopping one server (the supervisor goes on) ends its whole tree: a
// grandchild in a session of its own whose parent still runs, and, where
// the helper has cgroups, an orphan that detached itself (a daemon's
// double fork). Without cgroups the orphan is attributed to no server:
// it lives until the helper stops, and then not a moment longer.
func TestCloseEndsDetachedDescendants(t *testing.T) {
	release := reaper.Hold() // the helper outlives the connection, as in a supervisor
	defer release()
	name, value := treeTag(t)
	cfg := transports.Config{
		Command: "sh",
		Args:    []string{"-c", `setsid sleep 1000 & (setsid sleep 1001 &); exec cat`},
		Env:     map[string]string{name: value},
	}
	c, err := Dial(context.Background(), cfg, Options{CloseStdinTimeout: 300 * time.Millisecond, TerminateTimeout: 300 * time.Millisecond}, newRecorder())
	require.NoError(t, err)
	tag := name + "=" + value
	require.Eventually(t, func() bool { return len(stdiotest.WithEnv(tag)) == 3 }, 5*time.Second, 10*time.Millisecond,
		"the server and its two detached sleeps run")
	cgroup := inCgroup(c.Pid())
	if stdiotest.Unprivileged() {
		require.False(t, cgroup, "nobody cannot write the cgroup hierarchy here")
	}
	// The server itself holds stdin: closing it ends cat; the sleeps
	// ignore that.
	require.NoError(t, c.Close(context.Background()))

	left := stdiotest.Eventually(2*time.Second, func() []int { return stdiotest.WithEnv(tag) })
	if cgroup {
		assert.Empty(t, left, "with a cgroup, nothing of the server's tree survives its stop")
		return
	}
	// Without: the grandchild whose parent was the server is gone, the
	// orphan is not (yet).
	require.Len(t, left, 1, "only the orphan is left")
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(left[0]) + "/cmdline")
	assert.Contains(t, string(cmdline), "1001")
	release()
	assert.Empty(t, stdiotest.Eventually(2*time.Second, func() []int { return stdiotest.WithEnv(tag) }),
		"the helper's stop ends what no server owned")
}

// The same as an unprivileged user, without cgroups.
func TestCloseEndsDetachedDescendantsUnprivileged(t *testing.T) {
	stdiotest.RunUnprivileged(t, "TestCloseEndsDetachedDescendants")
}

// The shutdown ladder reaches a server that ignores SIGTERM and whose
// descendants left its process group: SIGKILL to the whole tree.
func TestLadderKillsTheTree(t *testing.T) {
	name, value := treeTag(t)
	cfg := transports.Config{
		Command: "sh",
		// The shell ignores SIGTERM and stdin's end; its child leaves
		// the group with setsid, and ignores SIGTERM too.
		Args: []string{"-c", `trap '' TERM; setsid sh -c "trap '' TERM; sleep 1000" & while :; do sleep 1; done`},
		Env:  map[string]string{name: value},
	}
	c, err := Dial(context.Background(), cfg, Options{CloseStdinTimeout: 200 * time.Millisecond, TerminateTimeout: 200 * time.Millisecond}, newRecorder())
	require.NoError(t, err)
	tag := name + "=" + value
	require.Eventually(t, func() bool { return len(stdiotest.WithEnv(tag)) >= 3 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, c.Close(context.Background()))
	assert.Empty(t, stdiotest.Eventually(2*time.Second, func() []int { return stdiotest.WithEnv(tag) }))
}

// A server whose process helper is killed dies with it (parent-death
// signal), and the next server gets a new helper.
func TestHelperDeathKillsItsServers(t *testing.T) {
	rec := newRecorder()
	c, err := Dial(context.Background(), transports.Config{Command: "cat"}, Options{}, rec)
	require.NoError(t, err)
	server := stdiotest.Self(c.Pid())
	helper := stdiotest.Parent(c.Pid())
	require.NotZero(t, helper)
	require.NoError(t, syscall.Kill(helper, syscall.SIGKILL))

	closedErr := rec.waitClosed(t)
	var pe *ProcessExitError
	require.ErrorAs(t, closedErr, &pe)
	assert.Contains(t, pe.Signal, "process helper ended")
	assert.Empty(t, stdiotest.Eventually(2*time.Second, func() []stdiotest.Proc {
		return stdiotest.Alive([]stdiotest.Proc{server})
	}), "the server died with its helper")
	require.NoError(t, c.Close(context.Background()))

	// A new helper for the next server.
	c2, err := Dial(context.Background(), transports.Config{Command: "cat"}, Options{}, newRecorder())
	require.NoError(t, err)
	assert.NotEqual(t, helper, stdiotest.Parent(c2.Pid()))
	require.NoError(t, c2.Close(context.Background()))
}
