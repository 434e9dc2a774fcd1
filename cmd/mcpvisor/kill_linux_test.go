package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox/sandboxtest"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

// stubbornServers are servers that leave things behind unless something
// ends them on purpose: one ignores SIGTERM and stdin EOF, one has a
// grandchild, one starts a grandchild in a session of its own and
// another that is orphaned at once (a daemon's double fork), one is a
// shell that sleeps after its server ends. With bwrap at hand, a confined
// server with two grandchildren (one in its own session).
func stubbornServers(t *testing.T, bin string) map[string]any {
	t.Helper()
	servers := map[string]any{
		"stubborn": mock(bin, "-ignore-sigterm"),
		"parent":   mock(bin, "-grandchild"),
		"detached": map[string]any{"command": "sh", "args": []string{"-c",
			`setsid sleep 1000 & (setsid sleep 1001 &); exec "$0" mock`, bin}},
		"wrapper": map[string]any{"command": "sh", "args": []string{"-c", `"$0" mock; sleep 1002`, bin}},
	}
	if _, err := exec.LookPath("bwrap"); err == nil {
		probe := probeBinary(t)
		servers["confined"] = map[string]any{"command": probe, "args": []string{"-grandchildren"}, "sandbox": true}
	}
	return servers
}

// sharedProbe is the sandbox probe server, built once for the test binary (a
// go build per test cost seconds each; four tests use it) next to the
// binary under test, in the directory TestMain removes. Nothing writes
// to it.
var sharedProbe struct {
	once sync.Once
	bin  string
	err  error
}

// probeBinary returns the probe server, building it on first use.
func probeBinary(t *testing.T) string {
	t.Helper()
	sharedProbe.once.Do(func() { sharedProbe.bin, sharedProbe.err = sandboxtest.Build(filepath.Dir(binPath)) })
	require.NoError(t, sharedProbe.err)
	return sharedProbe.bin
}

// startSuperviseAllReady starts `mcpvisor supervise` on the config with env
// entries added, and waits until every server in want is ready.
func startSuperviseAllReady(t *testing.T, bin, cfg string, want []string, env ...string) (*exec.Cmd, *logLines, func()) {
	t.Helper()
	cmd := exec.Command(bin, "supervise", "--config", cfg, "--listen", "127.0.0.1:0")
	cmd.Env = cliEnv(env...)
	p := startLogged(t, cmd)
	logs := p.logs
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = p.wait(t)
		})
	}
	t.Cleanup(stop)
	logs.waitFor(t, 30*time.Second, "every server ready", func(lines []map[string]any) bool {
		ready := map[string]bool{}
		for _, m := range lines {
			if m["message"] == "server state" && m["state"] == "ready" {
				ready[fmt.Sprint(m["server"])] = true
			}
		}
		for _, name := range want {
			if !ready[name] {
				return false
			}
		}
		return true
	})
	return cmd, logs, stop
}

// testTag is an environment entry unique to one test: every process the
// supervisor starts inherits it, however it detaches itself.
func testTag(t *testing.T) string {
	b := make([]byte, 8)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "MCPVISOR_TREE_TEST=" + hex.EncodeToString(b)
}

// assertNothingLeft checks, from /proc and not from the supervisor's
// bookkeeping, that no process of the tree survives within 2 s: neither
// one seen below the supervisor before, nor any carrying the test's tag.
func assertNothingLeft(t *testing.T, tree []stdiotest.Proc, tag string) {
	t.Helper()
	left := stdiotest.Eventually(2*time.Second, func() []stdiotest.Proc { return stdiotest.Alive(tree) })
	assert.Empty(t, left, "processes of the supervisor's tree still alive 2 s after its death")
	tagged := stdiotest.Eventually(time.Second, func() []int { return stdiotest.WithEnv(tag) })
	assert.Empty(t, tagged, "processes started by the supervisor (by their environment) still alive")
	for _, p := range tagged {
		syscall.Kill(p, syscall.SIGKILL) // leave the machine clean for the next test
	}
}

// SIGKILL of the supervisor: within 2 s nothing it started remains, not
// a server that ignores SIGTERM and EOF, not a detached grandchild, not
// a confined server's descendants.
func TestSIGKILLedSupervisorLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	servers := stubbornServers(t, bin)
	tag := testTag(t)
	cmd, _, _ := startSuperviseAllReady(t, bin, writeConfig(t, servers), keys(servers), tag)

	tree := stdiotest.Descendants(cmd.Process.Pid)
	// The reaper, 4 servers (5 with the confined one), the mock's
	// grandchild, the 2 detached sleeps, the wrapper's mock; bwrap and
	// its 2 grandchildren.
	want := 9
	if _, ok := servers["confined"]; ok {
		want += 4
	}
	require.GreaterOrEqual(t, len(tree), want, "the tree below the supervisor: %v", tree)
	require.GreaterOrEqual(t, len(stdiotest.WithEnv(tag)), want, "every process of the tree carries the tag")

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	assertNothingLeft(t, tree, tag)
}

// The same when the gateway is killed with 32 calls in flight: the calls
// end (their connection drops), and nothing remains.
func TestSIGKILLedGatewayWithCallsInFlightLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	servers := stubbornServers(t, bin)
	servers["a"] = mock(bin, "-name", "a")
	tag := testTag(t)
	cmd, logs, _ := startSuperviseAllReady(t, bin, writeConfig(t, servers), keys(servers), tag)
	base := gatewayURL(t, logs)
	if _, ok := servers["confined"]; ok {
		st := cli(t, "status", "--url", base)
		assert.Regexp(t, `(?m)^confined +connected +file +ready \(bwrap\) `, st.stdout, "the status names the sandbox in effect")
	}

	const calls = 32
	ended := make(chan string, calls)
	for i := range calls {
		go func() { ended <- statelessToolCall(base, i+1, "mcp__a__sleep", `{"ms":20000}`) }()
	}
	require.Eventually(t, func() bool {
		return strings.Contains(cli(t, "status", "--url", base).stdout, fmt.Sprintf("%d requests in flight", calls))
	}, 20*time.Second, 20*time.Millisecond, "32 calls in flight")
	tree := stdiotest.Descendants(cmd.Process.Pid)

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	deadline := time.After(5 * time.Second)
	for range calls {
		select {
		case r := <-ended:
			assert.NotContains(t, r, `"slept"`, "no call was answered by a dead gateway")
		case <-deadline:
			t.Fatal("calls in flight did not end within 5 s of the gateway's death")
		}
	}
	assertNothingLeft(t, tree, tag)
}

// A normal stop (SIGTERM: the shutdown ladder for every server) leaves
// nothing either, detached and orphaned grandchildren included.
func TestStoppedSupervisorLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	servers := stubbornServers(t, bin)
	tag := testTag(t)
	cmd, logs, _ := startSuperviseAllReady(t, bin, writeConfig(t, servers), keys(servers), tag)
	tree := stdiotest.Descendants(cmd.Process.Pid)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "log:\n%s", logs)
	case <-time.After(20 * time.Second):
		t.Fatalf("supervise did not stop within 20 s of SIGTERM; log:\n%s", logs)
	}
	assertNothingLeft(t, tree, tag)
}
