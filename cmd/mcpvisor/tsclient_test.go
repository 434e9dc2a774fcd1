package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		if os.Getenv("MCPVISOR_REQUIRE_INTEROP") == "1" {
			t.Fatal(msg + "; MCPVISOR_REQUIRE_INTEROP=1 makes this a failure")
		}
		t.Skip(msg)
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
		cmd := exec.Command("node", append([]string{filepath.Join(dir, "client.mjs")}, args...)...)
		cmd.Dir = dir
		cmd.Env = cliEnv()
		out, err := cmd.CombinedOutput()
		t.Logf("node %s:\n%s", args[0], out)
		require.NoError(t, err)
		assert.NotContains(t, string(out), "FAIL")
	}

	t.Run("http", func(t *testing.T) {
		cmd := exec.Command(bin, "supervise", "--config", cfg, "--listen", "127.0.0.1:0")
		cmd.Env = cliEnv()
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
			cmd.Process.Signal(os.Interrupt)
			<-read
			cmd.Wait()
		}()
		node("http", gatewayURL(t, logs)+"/mcp")
	})
	t.Run("stdio", func(t *testing.T) {
		start := time.Now()
		node("stdio", bin, cfg)
		t.Logf("stdio run took %v", time.Since(start))
	})
}
