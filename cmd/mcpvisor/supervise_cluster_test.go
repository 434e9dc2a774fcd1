package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clusterFreePorts reserves n loopback ports and releases them for the
// processes of a test.
func clusterFreePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range ls {
		ln.Close()
	}
	return ports
}

// clusterStatus reads a gateway's /status: server → member, and the
// ready servers.
func clusterStatus(base string) (members map[string]string, ready map[string]bool) {
	members, ready = map[string]string{}, map[string]bool{}
	resp, err := httpClient.Get(base + "/status")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Servers []struct {
			Name   string `json:"name"`
			State  string `json:"state"`
			Member string `json:"member"`
		} `json:"servers"`
	}
	if json.Unmarshal(b, &out) != nil {
		var list []struct {
			Name   string `json:"name"`
			State  string `json:"state"`
			Member string `json:"member"`
		}
		_ = json.Unmarshal(b, &list)
		out.Servers = list
	}
	for _, s := range out.Servers {
		members[s.Name] = s.Member
		ready[s.Name] = s.State == "ready"
	}
	return
}

// Two `supervise --cluster` processes share one config of remote servers
// (one mock serving them all): each gateway's /status shows every server
// with the member that runs it, a call through member B reaches a server
// that runs on member A, and when that server adds a tool (the mock's
// announce), B's event stream reports it and B's tools/list offers it.
func TestSuperviseClusterServesTheClusterWidePool(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	ports := clusterFreePorts(t, 5)
	mockAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	mockCmd := exec.Command(bin, "mock", "-transport", "http", "-listen", mockAddr)
	mockStdin, err := mockCmd.StdinPipe() // the mock serves until its stdin ends
	require.NoError(t, err)
	t.Cleanup(func() { mockStdin.Close() })
	mockProc := startLogged(t, mockCmd)
	for dl := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", mockAddr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(dl) {
			t.Fatalf("timed out waiting for the mock to listen on %s: %v\n%s", mockAddr, err, mockProc.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	servers := map[string]any{}
	const n = 10 // rendezvous puts all of them on one member with p = 2/1024
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		servers[name] = map[string]any{"type": "http", "url": "http://" + mockAddr + "/mcp/" + name}
	}
	cfg := writeConfig(t, servers)
	peers := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", ports[3], ports[4])
	var procs []*loggedProc
	var bases []string
	for i := range 2 {
		cmd := exec.Command(bin, "supervise", "--config", cfg, "--listen", "127.0.0.1:0", "--cluster",
			"--cluster-addr", "127.0.0.1:"+strconv.Itoa(ports[1+i]),
			"--cluster-membership-port", strconv.Itoa(ports[3+i]), "--cluster-peers", peers)
		// protoactor's remote.BlockList is written by gossip and read by
		// the membership poll without a lock (pinned version): a race
		// report inside the cluster, not in mcpvisor's code, that
		// actors/cluster does not work around yet. The members report
		// races without halting on them.
		cmd.Env = cliEnv("GORACE=atexit_sleep_ms=0 halt_on_error=0 exitcode=0")
		p := startLogged(t, cmd)
		procs = append(procs, p)
		bases = append(bases, gatewayURL(t, p.logs))
	}
	a, b := bases[0], bases[1]
	memberOf := func(p *loggedProc) string {
		var id string
		p.logs.waitFor(t, 20*time.Second, "the member's id", func(lines []map[string]any) bool {
			for _, m := range lines {
				if m["message"] == "cluster member started" {
					id = fmt.Sprint(m["member"])
					return true
				}
			}
			return false
		})
		return id
	}
	idA := memberOf(procs[0])
	t.Logf("member A: %s", idA)

	// Every server ready, seen from B, some of them on A.
	var members map[string]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ready map[string]bool
		members, ready = clusterStatus(b)
		all := len(members) == n
		onA := false
		for name, ok := range ready {
			all = all && ok
			onA = onA || members[name] == idA
		}
		all = all && onA // once both members are in the topology
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for B's /status to show %d ready servers; got %v %v\nA:\n%s\nB:\n%s", n, members, ready, procs[0].logs, procs[1].logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var onA string
	for name, m := range members {
		if m == idA {
			onA = name
		}
	}
	require.NotEmpty(t, onA, "no server runs on member A (%s): %v", idA, members)

	// A call through B reaches A's server.
	out := statelessToolCall(b, 1, "mcp__"+onA+"__echo", `{"text":"through b"}`)
	require.Contains(t, out, "through b", "calling %s through B", onA)
	// An unknown tool is the gateway's JSON-RPC error, as in single-node mode.
	out = statelessToolCall(b, 2, "mcp__"+onA+"__nope", `{}`)
	require.Contains(t, out, `"error"`, "an unknown tool")

	// The server on A adds a tool (called through A); B's events and pool get it.
	out = statelessToolCall(a, 3, "mcp__"+onA+"__announce", `{"text":"fresh"}`)
	require.Contains(t, out, "announced fresh")
	want := "mcp__" + onA + "__fresh"
	procs[1].logs.waitFor(t, 10*time.Second, "B's tools_changed event naming "+want, func(lines []map[string]any) bool {
		for _, m := range lines {
			if m["message"] == "tools_changed" && strings.Contains(fmt.Sprint(m["added"]), want) {
				return true
			}
		}
		return false
	})
	list := mcpPostNoFail(b, `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list")
	require.Contains(t, list, want, "B's tools/list")

	for _, p := range procs {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, p := range procs {
		_ = p.wait(t)
		p.exited = true
	}
}
