package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/etcdtest"
)

// Two `supervise --cluster --cluster-membership etcd` members find each
// other through a real etcd (protoactor's etcd provider): both run some
// of the servers, and when one is killed with -9 the other runs them all
// once the dead member's lease expires.
func TestSuperviseClusterEtcdMembership(t *testing.T) {
	endpoint := etcdtest.Start(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	ports := clusterFreePorts(t, 3)
	shared := startHTTPMock(t, bin, ports[0])
	servers := map[string]any{}
	const n = 24 // both members get some: 10 would leave one without any in 1 run of 512
	for i := range n {
		name := fmt.Sprintf("e%d", i)
		servers[name] = map[string]any{"type": "http", "url": "http://" + shared + "/mcp/" + name}
	}
	cfg := writeConfig(t, servers)
	var procs []*loggedProc
	var bases, ids []string
	for i := range 2 {
		p, base, id := startClusterMember(t, bin, cfg, "--cluster-membership", "etcd", "--etcd-endpoint", endpoint,
			"--etcd-prefix", "/etcd-membership-test", "--cluster-addr", "127.0.0.1:"+strconv.Itoa(ports[1+i]))
		procs, bases, ids = append(procs, p), append(bases, base), append(ids, id)
	}
	waitStatus(t, bases[0], 60*time.Second, "every server ready, on both members", func(members map[string]string, ready map[string]bool) bool {
		seen := map[string]bool{}
		for name, ok := range ready {
			if !ok {
				return false
			}
			seen[members[name]] = true
		}
		return len(ready) == n && seen[ids[0]] && seen[ids[1]]
	})
	killed := time.Now()
	require.NoError(t, procs[1].cmd.Process.Kill())
	_ = procs[1].wait(t)
	procs[1].exited = true
	waitStatus(t, bases[0], 30*time.Second, "every server ready on member 0", func(members map[string]string, ready map[string]bool) bool {
		for name, ok := range ready {
			if !ok || members[name] != ids[0] {
				return false
			}
		}
		return len(ready) == n
	})
	t.Logf("member 1's servers ready on member 0 %v after the kill (etcd lease 3 s)", time.Since(killed).Round(time.Millisecond))
	out := statelessToolCall(bases[0], 1, "mcp__e0__echo", `{"text":"after"}`)
	require.Contains(t, out, "after")
}
