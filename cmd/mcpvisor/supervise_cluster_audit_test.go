package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/audit"
)

// In --cluster mode each member writes its own trail, every line naming
// the member: a call through B to a server that runs on A is in B's
// trail (with B's id), a call through A in A's; both trails verify.
func TestSuperviseClusterAuditTrails(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	ports := clusterFreePorts(t, 5)
	mockAddr := startHTTPMock(t, bin, ports[0])
	cfg := writeConfig(t, map[string]any{
		"x": map[string]any{"type": "http", "url": "http://" + mockAddr + "/mcp/x", "nodes": map[string]string{"role": "a"}},
	})
	peers := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", ports[3], ports[4])
	var procs []*loggedProc
	var bases, ids, trails []string
	for i := range 2 {
		trail := filepath.Join(dir, fmt.Sprintf("audit-%d.log", i))
		flags := []string{"--cluster-addr", "127.0.0.1:" + strconv.Itoa(ports[1+i]),
			"--cluster-membership-port", strconv.Itoa(ports[3+i]), "--cluster-peers", peers, "--audit", trail}
		if i == 0 {
			flags = append(flags, "--cluster-label", "role=a")
		}
		p, base, id := startClusterMember(t, bin, cfg, flags...)
		procs, bases, ids, trails = append(procs, p), append(bases, base), append(ids, id), append(trails, trail)
	}
	require.Eventually(t, func() bool {
		members, ready := clusterStatus(bases[1])
		return ready["x"] && members["x"] == ids[0]
	}, 30*time.Second, 100*time.Millisecond, "x ready on A, seen from B")

	require.Contains(t, statelessToolCall(bases[1], 21, "mcp__x__echo", `{"text":"via b"}`), "via b")
	require.Contains(t, statelessToolCall(bases[0], 11, "mcp__x__echo", `{"text":"via a"}`), "via a")
	for _, p := range procs {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, p := range procs {
		_ = p.wait(t)
		p.exited = true
	}
	for i, trail := range trails {
		rep, err := audit.Verify(trail)
		require.NoError(t, err, "member %d", i)
		b, err := os.ReadFile(trail)
		require.NoError(t, err)
		var calls []audit.Line
		for _, s := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			l, err := audit.DecodeLine([]byte(s))
			require.NoError(t, err)
			assert.Equal(t, ids[i], l.Member, "every line names its member")
			if l.Action == audit.ActionToolsCall {
				calls = append(calls, l)
			}
		}
		require.Len(t, calls, 1, "member %d's trail (%d lines): %s", i, rep.Lines, b)
		assert.Equal(t, "x", calls[0].Server)
		assert.Equal(t, audit.OutcomeOK, calls[0].Outcome)
		assert.Equal(t, map[int]string{0: "11", 1: "21"}[i], string(calls[0].RequestID))
	}
}
