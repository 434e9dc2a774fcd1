package stdio

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// threads is this process's number of OS threads.
func threads(t *testing.T) int {
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// Waiting for many live processes parks goroutines in the poller, not
// OS threads in waitid(2); an exit is noticed, and leaves the process
// for cmd.Wait to reap.
func TestAwaitExitHoldsNoThread(t *testing.T) {
	const n = 50
	before := threads(t)
	cmds := make([]*exec.Cmd, n)
	done := make(chan bool, n)
	for i := range cmds {
		cmds[i] = exec.Command("sleep", "60")
		require.NoError(t, cmds[i].Start())
		go func(pid int) { done <- awaitExit(pid) }(cmds[i].Process.Pid)
	}
	t.Cleanup(func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	})
	time.Sleep(200 * time.Millisecond) // let every waiter park
	assert.Less(t, threads(t)-before, n/2, "waiters must not each hold a thread")

	require.NoError(t, cmds[0].Process.Kill())
	select {
	case ok := <-done:
		assert.True(t, ok, "the exit is seen through the pidfd")
	case <-time.After(10 * time.Second):
		t.Fatal("the exit of a killed process was not noticed")
	}
	err := cmds[0].Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "cmd.Wait still reaps the process and reports how it ended")
	assert.Contains(t, ee.Error(), "killed")
}
