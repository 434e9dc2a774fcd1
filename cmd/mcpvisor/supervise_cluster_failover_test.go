package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

// The proof with supervise processes: three `supervise --cluster`
// members (sealed sessions, one key file), 30 remote servers on one mock,
// an announcer on its own mock, and 3 stdio servers pinned by a label two
// members have. Client workers call tools through member 0 while member 1
// is killed with -9: every server of member 1 comes back on a survivor
// (the time is logged from the survivors' events, not asserted), calls
// fail typed or succeed, none hangs, and once re-homed no call fails. A
// 2025-11-25 session opened on member 1 is served by member 2 with no new
// initialize, and a list_changed reaches its new GET stream there. Then
// member 2 leaves gracefully (SIGTERM) under the same load: no call fails.
func TestSuperviseClusterKillAMember(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	keys := filepath.Join(dir, "keys.json")
	secret := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	require.NoError(t, os.WriteFile(keys, []byte(`{"keys":[{"secret":"`+secret+`"}]}`), 0o600))
	ports := clusterFreePorts(t, 8)
	shared := startHTTPMock(t, bin, ports[0])
	announcer := startHTTPMock(t, bin, ports[1])
	servers := map[string]any{}
	var tools []string
	for i := range 30 {
		name := fmt.Sprintf("r%02d", i)
		servers[name] = map[string]any{"type": "http", "url": "http://" + shared + "/mcp/" + name}
		tools = append(tools, "mcp__"+name+"__echo")
	}
	for i := range 3 {
		name := fmt.Sprintf("stdio%d", i)
		servers[name] = map[string]any{"command": bin, "args": []string{"mock"}, "nodes": map[string]string{"stdio": "yes"}}
		tools = append(tools, "mcp__"+name+"__echo")
	}
	servers["ann"] = map[string]any{"type": "http", "url": "http://" + announcer + "/mcp/ann"}
	total := len(servers)
	cfg := writeConfig(t, servers)
	peers := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", ports[5], ports[6], ports[7])
	var procs []*loggedProc
	var bases, ids []string
	for i := range 3 {
		flags := []string{"--session-keys", keys, "--cluster-addr", "127.0.0.1:" + strconv.Itoa(ports[2+i]),
			"--cluster-membership-port", strconv.Itoa(ports[5+i]), "--cluster-peers", peers}
		if i < 2 {
			flags = append(flags, "--cluster-label", "stdio=yes")
		}
		p, base, id := startClusterMember(t, bin, cfg, flags...)
		procs, bases, ids = append(procs, p), append(bases, base), append(ids, id)
	}
	front, victim, other := bases[0], bases[1], bases[2]

	// Every server ready, some on the victim.
	var before map[string]string
	waitStatus(t, front, 60*time.Second, "every server ready on a member, some on member 1", func(members map[string]string, ready map[string]bool) bool {
		n := 0
		for name, ok := range ready {
			if ok && members[name] != "" {
				n++
			}
		}
		on1 := false
		for _, m := range members {
			on1 = on1 || m == ids[1]
		}
		before = members
		return n == total && on1
	})
	var moved []string
	for name, m := range before {
		if m == ids[1] {
			moved = append(moved, name)
		}
	}
	t.Logf("member 1 (%s) runs %d servers: %v", ids[1], len(moved), moved)

	// A session on the victim.
	// The victim's own view of the cluster's pool may lag member 0's
	// status by a moment: its list has every server soon after.
	session := initSession(t, victim)
	require.Eventually(t, func() bool {
		return strings.Contains(mcpPostSession(t, victim, session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), "r00__echo")
	}, 20*time.Second, 50*time.Millisecond, "member 1 lists r00's tools")

	// Client workers through member 0.
	type outcome struct {
		at  time.Time
		ok  bool
		out string
	}
	var mu sync.Mutex
	var outcomes []outcome
	var stop atomic.Bool
	var wg sync.WaitGroup
	var hung atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				tool := tools[(w*7+i)%len(tools)]
				start := time.Now()
				out := statelessToolCall(front, i, tool, `{"text":"hi"}`)
				if strings.Contains(out, "Client.Timeout") { // no answer within testwait.Patience
					hung.Add(1)
				}
				mu.Lock()
				outcomes = append(outcomes, outcome{at: start, ok: strings.Contains(out, `"result"`) && strings.Contains(out, "hi"), out: out})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Second) // testwait:ok a load window: the callers run a second before the kill
	// Member 1's process tree (its stdio servers and their reapers, from
	// /proc; empty where there is no /proc).
	tree := stdiotest.Descendants(procs[1].cmd.Process.Pid)
	killed := time.Now()
	require.NoError(t, procs[1].cmd.Process.Kill()) // SIGKILL
	_ = procs[1].wait(t)
	procs[1].exited = true
	left := stdiotest.Eventually(2*time.Second, func() []stdiotest.Proc { return stdiotest.Alive(tree) })
	require.Empty(t, left, "processes of member 1's tree (of %d) still alive 2 s after its SIGKILL", len(tree))
	t.Logf("member 1's tree: %d processes, none left after its SIGKILL", len(tree))

	// The session goes on on member 2, with no new initialize.
	answer := mcpPostSession(t, other, session, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	require.Contains(t, answer, "r00__echo", "member 2 answers member 1's session")

	var rehomed time.Time
	waitStatus(t, front, 30*time.Second, "every server of member 1 ready on a survivor", func(members map[string]string, ready map[string]bool) bool {
		for _, name := range moved {
			if !ready[name] || members[name] == ids[1] || members[name] == "" {
				return false
			}
		}
		rehomed = time.Now()
		return true
	})
	t.Logf("member 1's servers ready on survivors (seen through /status) %v after the kill", rehomed.Sub(killed).Round(time.Millisecond))
	t.Logf("from the survivors' events: last ready %v after the kill", lastReady(procs[0], procs[2], moved, killed))

	// A list_changed from a server homed anywhere reaches the session's
	// new GET stream on member 2.
	stream := openGetStream(t, other, session)
	out := statelessToolCall(front, 99, "mcp__ann__announce", `{"text":"late"}`)
	require.Contains(t, out, "announced late")
	stream.waitFor(t, 10*time.Second, "notifications/tools/list_changed", "list_changed on member 2's GET stream of member 1's session")

	time.Sleep(2 * time.Second) // testwait:ok a load window: calls after the re-homing

	// Member 2 leaves gracefully (SIGTERM: drain, hand over, leave) under
	// the same load: its servers move to member 0 and no call fails.
	leaving := time.Now()
	require.NoError(t, procs[2].cmd.Process.Signal(os.Interrupt))
	waitStatus(t, front, 30*time.Second, "every server ready on member 0", func(members map[string]string, ready map[string]bool) bool {
		for name, ok := range ready {
			if !ok || members[name] != ids[0] {
				return false
			}
		}
		return len(ready) == total
	})
	t.Logf("member 2 leaving gracefully: every server ready on member 0 %v after its SIGTERM", time.Since(leaving).Round(time.Millisecond))
	require.NoError(t, procs[2].wait(t), "member 2's graceful exit; log:\n%s", procs[2].logs)
	procs[2].exited = true
	t.Logf("member 2 exited %v after its SIGTERM", time.Since(leaving).Round(time.Millisecond))
	time.Sleep(time.Second) // testwait:ok a load window: calls after the leave
	stop.Store(true)
	testwait.Call(t, "the callers to stop (each call is bounded by its client's timeout)", wg.Wait)
	require.Zero(t, hung.Load(), "calls that hung")
	var failedGap, failedAfter, total2 int
	for _, o := range outcomes {
		total2++
		switch {
		case o.ok:
		case o.at.After(rehomed):
			failedAfter++
			t.Errorf("a call after the re-homing (or during member 2's graceful leave) failed: %s", o.out)
		case o.at.After(killed.Add(-time.Second)):
			failedGap++
			require.Contains(t, o.out, `"error"`, "a call during the gap fails typed (a JSON-RPC error or an error result)")
		default:
			t.Errorf("a call before the kill failed: %s", o.out)
		}
	}
	t.Logf("calls: %d, failed during the gap: %d, failed after re-homing: %d", total2, failedGap, failedAfter)
	require.Zero(t, failedAfter)
	require.NoError(t, procs[0].cmd.Process.Signal(os.Interrupt))
	_ = procs[0].wait(t)
	procs[0].exited = true
}

// waitStatus polls the gateway's /status until ok holds.
func waitStatus(t *testing.T, base string, timeout time.Duration, what string, ok func(members map[string]string, ready map[string]bool) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		members, ready := clusterStatus(base)
		if ok(members, ready) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; status: %v %v", what, members, ready)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lastReady is how long after since the last of names got ready on one of
// the members, from their "cluster member" ready events.
func lastReady(a, b *loggedProc, names []string, since time.Time) time.Duration {
	var last time.Time
	for _, p := range []*loggedProc{a, b} {
		p.logs.mu.Lock()
		for _, m := range p.logs.lines {
			if m["message"] != "cluster member" || m["event"] != "ready" {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m["at"]))
			if err != nil || at.Before(since) {
				continue
			}
			for _, n := range names {
				if m["server"] == n && at.After(last) {
					last = at
				}
			}
		}
		p.logs.mu.Unlock()
	}
	if last.IsZero() {
		return 0
	}
	return last.Sub(since).Round(time.Millisecond)
}
