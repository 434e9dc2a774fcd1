//go:build unix

package stdio

import (
	"os/exec"
	"syscall"

	"github.com/mcpvisor/mcpvisor/transports"
)

// newCommand builds the server's command: cfg.Command as os/exec finds
// it on the PATH, in a process group of its own so that the shutdown
// ladder's signals reach whatever it starts. env is the environment the
// server will get.
func newCommand(cfg transports.Config, env []string) (*exec.Cmd, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, nil
}

// processTree is the server's process group, whose id is the server's
// pid. A descendant that leaves the group (setsid) is out of its reach.
type processTree struct{ pgid int }

// contain returns the started server's process tree.
func contain(cmd *exec.Cmd) (processTree, error) {
	return processTree{pgid: cmd.Process.Pid}, nil
}

// signal sends sig to every process of the group.
func (t processTree) signal(sig syscall.Signal) { _ = syscall.Kill(-t.pgid, sig) }

// alive reports whether any process of the group remains.
func (t processTree) alive() bool { return syscall.Kill(-t.pgid, 0) == nil }

// release frees what the tree holds: nothing, for a process group.
func (t processTree) release() {}

// writeOnce makes one write of buf to the non-blocking descriptor behind
// raw and returns how many bytes it wrote (0 on any error).
func writeOnce(raw syscall.RawConn, buf []byte) int {
	n := 0
	err := raw.Write(func(fd uintptr) bool {
		m, err := syscall.Write(int(fd), buf)
		if err == nil {
			n = m
		}
		return true // one attempt, whatever happened
	})
	if err != nil {
		return 0
	}
	return n
}
