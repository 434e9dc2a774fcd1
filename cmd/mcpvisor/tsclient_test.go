package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/interop"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// tsSDK returns the node_modules directory holding
// @modelcontextprotocol/sdk (make deps installs it into .deps/npm), or
// skips the test (fails it with MCPVISOR_REQUIRE_INTEROP=1).
func tsSDK(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs("../../.deps/npm/node_modules")
	if v := os.Getenv("MCPVISOR_NODE_MODULES"); v != "" {
		dir = v
	}
	_, err := os.Stat(filepath.Join(dir, "@modelcontextprotocol", "sdk", "package.json"))
	_, nodeErr := exec.LookPath("node")
	if err != nil || nodeErr != nil {
		msg := "the TypeScript SDK (make deps) or node is missing"
		interop.Missing(t, msg)
	}
	return dir
}

// The official TypeScript SDK client lists and calls tools through the
// gateway over Streamable HTTP and stdio, and sees a tool added behind it.
// Not parallel, like TestSuperviseReload.
func TestTypeScriptSDKClient(t *testing.T) {
	modules := tsSDK(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	// a is marked trusted: the tool the client adds through it is offered
	// at once (on a server not marked trusted, a new tool waits for the
	// user's approval; see TestToolDefinitionsArePinned).
	a := mock(bin, "-name", "a")
	a["trust"] = "trusted"
	cfg := writeConfig(t, map[string]any{
		"a": a,
		"b": mock(bin, "-name", "b", "-versions", "2025-06-18"),
	})
	// The script imports the SDK by package name: run it from a directory
	// whose node_modules is the SDK's.
	script, err := os.ReadFile("../../testdata/tsclient/client.mjs")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(modules, filepath.Join(dir, "node_modules")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "client.mjs"), script, 0o644))

	node := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(testwait.Context(t), "node", append([]string{filepath.Join(dir, "client.mjs")}, args...)...)
		cmd.Dir = dir
		cmd.Env = cliEnv()
		cmd.WaitDelay = time.Second
		out, err := cmd.CombinedOutput()
		t.Logf("node %s:\n%s", args[0], out)
		require.NoError(t, err)
		assert.NotContains(t, string(out), "FAIL")
	}

	t.Run("http", func(t *testing.T) {
		cmd := exec.Command(bin, "supervise", "--config", cfg, "--listen", "127.0.0.1:0")
		p := startLogged(t, cmd)
		node("http", gatewayURL(t, p.logs)+"/mcp")
		require.NoError(t, cmd.Process.Signal(os.Interrupt))
		require.NoError(t, p.wait(t), "supervise exits cleanly on SIGINT; log:\n%s", p.logs)
	})
	t.Run("stdio", func(t *testing.T) {
		start := time.Now()
		node("stdio", bin, cfg)
		t.Logf("stdio run took %v", time.Since(start))
	})
}
