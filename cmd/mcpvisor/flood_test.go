package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// procKB reads a "Name: N kB" line of /proc/<pid>/status.
func procKB(t *testing.T, pid int, name string) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			n, err := strconv.Atoi(strings.Fields(rest)[0])
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", name, pid)
	return 0
}

// TestSessionFloodRSS measures the resident memory of `mcpvisor supervise`
// before and after a flood of HTTP sessions that are opened with
// initialize and never closed. Opt-in: MCPVISOR_FLOOD_SESSIONS=N runs it
// with N sessions (25000 in the report); MCPVISOR_FLOOD_BIN measures
// another binary (an older build, for the figures before the session
// cap); MCPVISOR_FLOOD_ARGS adds supervise flags. It logs the figures
// and asserts nothing about them (performance is measured, not tested);
// the cap itself is tested by the gateway's TestGatewaySessionFloodIsBounded.
func TestSessionFloodRSS(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MCPVISOR_FLOOD_SESSIONS"))
	if n <= 0 {
		t.Skip("set MCPVISOR_FLOOD_SESSIONS=N to measure")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc")
	}
	bin := binPath
	if b := os.Getenv("MCPVISOR_FLOOD_BIN"); b != "" {
		bin = b
	}
	cfg := writeConfig(t, map[string]any{"a": mock(binPath, "-name", "a")})
	extra := strings.Fields(os.Getenv("MCPVISOR_FLOOD_ARGS"))
	args := append([]string{"supervise", "--config", cfg, "--listen", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(bin, args...)
	base := gatewayURL(t, startLogged(t, cmd).logs)
	require.Eventually(t, func() bool { return strings.Contains(cli(t, "status", "--url", base).stdout, "ready") },
		20*time.Second, 50*time.Millisecond)
	pid := cmd.Process.Pid
	before := procKB(t, pid, "VmRSS")

	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	var next, failures atomic.Int64
	began := time.Now()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(init))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := client.Do(req)
				if err != nil {
					failures.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
					failures.Add(1)
				}
			}
		})
	}
	testwait.CallWithin(t, 10*time.Minute, fmt.Sprintf("the %d initializes of the flood", n), wg.Wait)
	elapsed := time.Since(began)
	client.CloseIdleConnections()
	time.Sleep(2 * time.Second) // testwait:ok a pause, not a wait: let the runtime settle; RSS is what the process holds
	after, peak := procKB(t, pid, "VmRSS"), procKB(t, pid, "VmHWM")
	var sessions string
	for line := range strings.Lines(cli(t, "status", "--url", base, "--json").stdout) {
		if strings.Contains(line, `"sessions"`) {
			sessions = strings.TrimSpace(line)
		}
	}
	t.Logf("binary %s %s", bin, strings.Join(extra, " "))
	t.Logf("%d sessions opened in %s (%d failed); %s", n, elapsed.Round(time.Millisecond), failures.Load(), sessions)
	t.Logf("RSS before %d kB, after %d kB (+%d kB, %.2f kB per session opened); peak %d kB",
		before, after, after-before, float64(after-before)/float64(n), peak)
	require.Zero(t, failures.Load(), "every initialize is answered with a session")
}
