package main

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// loggedProc is a long-lived process of the binary under test (supervise)
// whose stderr is read as JSON log lines.
type loggedProc struct {
	cmd    *exec.Cmd
	logs   *logLines
	read   chan struct{} // closed when stderr has ended
	exited bool
}

// startLogged starts cmd (its environment set to cliEnv when empty) and
// reads its stderr into logs. When the test ends, a process still running
// is killed and waited for, within testwait's deadlines.
func startLogged(t *testing.T, cmd *exec.Cmd) *loggedProc {
	t.Helper()
	if cmd.Env == nil {
		cmd.Env = cliEnv()
	}
	// A process left holding the output pipes (a grandchild) must not
	// keep Wait from returning.
	cmd.WaitDelay = time.Second
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &loggedProc{cmd: cmd, logs: &logLines{more: make(chan struct{}, 1)}, read: make(chan struct{})}
	go func() {
		defer close(p.read)
		p.logs.read(stderr)
	}()
	t.Cleanup(func() {
		if !p.exited {
			_ = cmd.Process.Kill()
			_ = p.wait(t)
		}
	})
	return p
}

// wait waits for the process to exit and its stderr to end, and returns
// Wait's error. It fails the test when either takes longer than
// testwait.Patience.
func (p *loggedProc) wait(t *testing.T) error {
	t.Helper()
	testwait.Done(t, p.read, "the stderr of "+p.cmd.String()+" to end; log:\n"+p.logs.String())
	err := testwait.Result(t, "the exit of "+p.cmd.String(), p.cmd.Wait)
	p.exited = true
	return err
}
