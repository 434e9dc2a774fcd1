package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// startupServers is a config whose servers take delay to start (two of
// them, in two eras), beside one that starts at once, one lazy server
// that would take a minute (it must not hold the first list back) and a
// disabled one. It returns the config and the servers whose tools the
// first list must have.
func startupServers(t *testing.T, bin string, delay time.Duration) (string, []string) {
	lazy := mock(bin, "-name", "lazy", "-init-delay", "1m")
	lazy["lazy"] = true
	off := mock(bin, "-name", "off")
	off["disabled"] = true
	cfg := writeConfig(t, map[string]any{
		"fast": mock(bin, "-name", "fast"),
		"slow": mock(bin, "-name", "slow", "-init-delay", delay.String()),
		"old":  mock(bin, "-name", "old", "-init-delay", delay.String(), "-versions", "2025-06-18"),
		"lazy": lazy,
		"off":  off,
	})
	return cfg, []string{"fast", "slow", "old"}
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

var firstListMs = regexp.MustCompile(`first-list-ms (\d+)`)

// The official TypeScript SDK client does what agent hosts do at start,
// against servers that take 1, 3 and 5 s to start: over stdio it starts
// `supervise --stdio` itself, over HTTP it connects the moment the port
// answers; either way it lists the tools once, with no retry, and calls a
// tool of every server. The first list has them all (before the start-up
// window it had 1 tool of the pool), and every call succeeds (before, a
// call to a server still starting was "unknown tool"). The time from the
// gateway's start to the answer of that list is logged.
func TestTypeScriptSDKClientAtStartUp(t *testing.T) {
	modules := tsSDK(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	script, err := os.ReadFile("../../testdata/tsclient/startup.mjs")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(modules, filepath.Join(dir, "node_modules")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "startup.mjs"), script, 0o644))

	node := func(t *testing.T, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(testwait.Context(t), "node", append([]string{filepath.Join(dir, "startup.mjs")}, args...)...)
		cmd.Dir = dir
		cmd.Env = cliEnv()
		cmd.WaitDelay = time.Second
		out, err := cmd.CombinedOutput()
		t.Logf("node %s:\n%s", args[0], out)
		require.NoError(t, err)
		assert.NotContains(t, string(out), "FAIL")
		m := firstListMs.FindStringSubmatch(string(out))
		require.NotNil(t, m, "the script reports when the first list was answered")
		return m[1]
	}

	// The six runs are independent (their own configs, ports and state
	// directories) and mostly wait for processes to start: in parallel.
	for _, delay := range []time.Duration{time.Second, 3 * time.Second, 5 * time.Second} {
		t.Run(fmt.Sprintf("stdio/%v", delay), func(t *testing.T) {
			t.Parallel()
			cfg, servers := startupServers(t, bin, delay)
			ms := node(t, "stdio", bin, cfg, t.TempDir(), strings.Join(servers, ","))
			t.Logf("servers starting in %v: first tools/list complete %s ms after supervise --stdio started", delay, ms)
		})
		t.Run(fmt.Sprintf("http/%v", delay), func(t *testing.T) {
			t.Parallel()
			cfg, servers := startupServers(t, bin, delay)
			addr := freePort(t)
			t0 := time.Now()
			cmd := exec.Command(bin, "supervise", "--config", cfg, "--listen", addr, "--state-dir", t.TempDir())
			p := startLogged(t, cmd)
			ms := node(t, "http", "http://"+addr+"/mcp", fmt.Sprint(t0.UnixMilli()), strings.Join(servers, ","))
			t.Logf("servers starting in %v: first tools/list complete %s ms after supervise started", delay, ms)
			// The lazy server, which would take a minute, held nothing back.
			p.logs.waitFor(t, 10*time.Second, "the start-up gate to open", func(lines []map[string]any) bool {
				for _, m := range lines {
					if m["message"] == "the servers configured at start have settled" {
						return true
					}
				}
				return false
			})
			require.NoError(t, cmd.Process.Signal(os.Interrupt))
			require.NoError(t, p.wait(t), "supervise exits cleanly on SIGINT; log:\n%s", p.logs)
		})
	}
}
