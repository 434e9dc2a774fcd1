package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/stretchr/testify/require"
)

// procCPU returns the user+system CPU time a process has used so far
// (/proc/<pid>/stat, in clock ticks of 10 ms).
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	require.Positive(t, i, "a stat line: %s", s)
	f := strings.Fields(s[i+1:])
	// After the command: state is field 3, utime 14 and stime 15 (1-based).
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	require.NoError(t, err1)
	require.NoError(t, err2)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// TestGatewayCPUPerCall measures what `mcpvisor supervise` spends per
// tools/call: the gateway process's CPU time (from /proc, so the client
// and the mock server behind the gateway, other processes, are not
// counted) over N calls of echo (16 bytes) through Streamable HTTP on
// loopback, one at a time and 32 in flight, in the handshake era (one
// session) and the stateless era. The client is a bare net/http loop, so
// that the gateway is what is measured. Opt-in: MCPVISOR_GATEWAY_CPU_CALLS=N
// runs it with N calls per row (20000 in the report); MCPVISOR_GATEWAY_CPU_BIN
// measures another binary (an older build, for the figures before a
// change); MCPVISOR_GATEWAY_CPU_ROWS=2026-07-28/1,… runs only the rows
// named era/in-flight. It logs the figures and asserts only that every call was
// answered (performance is measured, not tested). Run it without -race.
func TestGatewayCPUPerCall(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MCPVISOR_GATEWAY_CPU_CALLS"))
	if n <= 0 {
		t.Skip("set MCPVISOR_GATEWAY_CPU_CALLS=N to measure")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	bin := binPath
	if b := os.Getenv("MCPVISOR_GATEWAY_CPU_BIN"); b != "" {
		bin = b
	}
	cfg := writeConfig(t, map[string]any{"m": mock(binPath, "-name", "m")})
	cmd := exec.Command(bin, "supervise", "--config", cfg, "--listen", "127.0.0.1:0")
	cmd.Env = cliEnv()
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	logs := &logLines{more: make(chan struct{}, 1)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		logs.read(stderr)
	}()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		waited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(waited)
		}()
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			testwait.Done(t, waited, "the exit of the killed gateway")
		}
		testwait.Done(t, read, "the end of the gateway's stderr")
	}()
	base := gatewayURL(t, logs)
	// GET /status and look for "ready" rather than `mcpvisor status
	// --url`: an older build's /status may not decode with this CLI.
	require.Eventually(t, func() bool {
		resp, err := httpClient.Get(base + "/status")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"ready"`)
	}, 20*time.Second, 50*time.Millisecond, "the mock server behind the gateway to be ready")

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	post := func(body string, headers map[string]string) (int, string, http.Header) {
		req, err := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error(), nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	code, body, h := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"cpu","version":"1"}}}`, nil)
	require.Equal(t, http.StatusOK, code, body)
	sid := h.Get("Mcp-Session-Id")
	require.NotEmpty(t, sid)
	code, body, _ = post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Mcp-Session-Id": sid})
	require.Equal(t, http.StatusAccepted, code, body)

	type era struct {
		name    string
		body    string
		headers map[string]string
	}
	eras := []era{
		{"2025-11-25", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__m__echo","arguments":{"text":"0123456789abcdef"}}}`,
			map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}},
		{"2026-07-28", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"cpu","version":"1"}},` +
			`"name":"mcp__m__echo","arguments":{"text":"0123456789abcdef"}}}`,
			map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "mcp__m__echo"}},
	}
	pid := cmd.Process.Pid
	t.Logf("binary %s, %d calls per row", bin, n)
	rows := os.Getenv("MCPVISOR_GATEWAY_CPU_ROWS")
	for _, e := range eras {
		for _, inflight := range []int{1, 32} {
			if row := fmt.Sprintf("%s/%d", e.name, inflight); rows != "" && !slices.Contains(strings.Split(rows, ","), row) {
				continue
			}
			for range 200 { // warm up
				code, body, _ := post(e.body, e.headers)
				require.Equal(t, http.StatusOK, code, body)
			}
			var next, failures atomic.Int64
			var firstFailure atomic.Value
			cpu0 := procCPU(t, pid)
			began := time.Now()
			var wg sync.WaitGroup
			for range inflight {
				wg.Go(func() {
					for next.Add(1) <= int64(n) {
						code, body, _ := post(e.body, e.headers)
						if code != http.StatusOK || !strings.Contains(body, "0123456789abcdef") {
							failures.Add(1)
							firstFailure.CompareAndSwap(nil, fmt.Sprintf("%d %s", code, body))
						}
					}
				})
			}
			// Opt-in, N calls per row: bounded by the calls' own 30 s
			// client timeout rather than by Patience.
			testwait.CallWithin(t, time.Duration(n)*30*time.Second, fmt.Sprintf("the %d calls of the row", n), wg.Wait)
			elapsed := time.Since(began)
			cpu := procCPU(t, pid) - cpu0
			t.Logf("%s, %2d in flight: %7.0f calls/s, gateway CPU %6.1f µs per call",
				e.name, inflight, float64(n)/elapsed.Seconds(), float64(cpu.Microseconds())/float64(n))
			require.Zero(t, failures.Load(), "every call is answered; the first failure: %v", firstFailure.Load())
		}
	}
}
