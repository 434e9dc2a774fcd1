//go:build unix

package main

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// TestSuperviseClusterAMemberCutOffExitsWhenItComesBack: two
// `supervise --cluster` members; member 1 is stopped (SIGSTOP) until
// member 0 runs every server, then let go on (SIGCONT). The cluster
// removed it and never lets its id back in, so it must not keep its old
// servers or take new ones: it fences itself, releases them and exits 1
// with a message saying why, while member 0 goes on serving every server.
func TestSuperviseClusterAMemberCutOffExitsWhenItComesBack(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	ports := clusterFreePorts(t, 5)
	shared := startHTTPMock(t, bin, ports[0])
	// Members' ids are random, and so is which member rendezvous hashing
	// gives each server: with 8 servers, 1 run in 128 would give member 1
	// none; with 24, 1 in 8 million.
	const n = 24
	servers := map[string]any{}
	for i := range n {
		name := fmt.Sprintf("r%02d", i)
		servers[name] = map[string]any{"type": "http", "url": "http://" + shared + "/mcp/" + name}
	}
	cfg := writeConfig(t, servers)
	peers := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", ports[3], ports[4])
	var procs []*loggedProc
	var bases, ids []string
	for i := range 2 {
		p, base, id := startClusterMember(t, bin, cfg, "--cluster-addr", "127.0.0.1:"+strconv.Itoa(ports[1+i]),
			"--cluster-membership-port", strconv.Itoa(ports[3+i]), "--cluster-peers", peers)
		procs, bases, ids = append(procs, p), append(bases, base), append(ids, id)
	}
	waitStatus(t, bases[0], 60*time.Second, "every server ready, some on each member", func(members map[string]string, ready map[string]bool) bool {
		seen := map[string]bool{}
		for name, ok := range ready {
			if !ok {
				return false
			}
			seen[members[name]] = true
		}
		return len(ready) == len(servers) && len(seen) == 2
	})

	cut := procs[1]
	require.NoError(t, cut.cmd.Process.Signal(syscall.SIGSTOP))
	waitStatus(t, bases[0], 60*time.Second, "every server ready on member 0 alone", func(members map[string]string, ready map[string]bool) bool {
		seen := map[string]bool{}
		for name, ok := range ready {
			if !ok {
				return false
			}
			seen[members[name]] = true
		}
		return len(ready) == len(servers) && len(seen) == 1
	})
	require.NoError(t, cut.cmd.Process.Signal(syscall.SIGCONT))
	exited := make(chan error, 1)
	go func() {
		<-cut.read // Wait closes the stderr pipe: the log is read to its end first
		exited <- cut.cmd.Wait()
	}()
	select {
	case err := <-exited:
		cut.exited = true
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "member 1 exited with %v; log:\n%s", err, cut.logs.String())
		require.Equal(t, 1, ee.ExitCode(), "member 1's exit code; log:\n%s", cut.logs.String())
	case <-time.After(30 * time.Second):
		// Killed and waited for here, so that the clean-up does not call
		// Wait beside the goroutine above.
		_ = cut.cmd.Process.Kill()
		testwait.Recv(t, exited, "member 1's exit after its kill")
		cut.exited = true
		t.Fatalf("member 1 did not exit within 30 s of coming back; log:\n%s", cut.logs.String())
	}
	require.Contains(t, cut.logs.String(), "the cluster removed this member")
	waitStatus(t, bases[0], 30*time.Second, "every server ready on member 0 after member 1 left", func(members map[string]string, ready map[string]bool) bool {
		for name := range servers {
			if !ready[name] || members[name] != ids[0] {
				return false
			}
		}
		return true
	})
	session := initSession(t, bases[0])
	for i := range n {
		body := mcpPostSession(t, bases[0], session, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"mcp__r%02d__echo","arguments":{"text":"hi"}}}`, i+10, i))
		require.Contains(t, body, `"hi"`, "a call through member 0 after member 1 left")
	}
}
