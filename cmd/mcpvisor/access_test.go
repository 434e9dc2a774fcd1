package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// supervise takes the gateway's access rules from the config's "access"
// member and applies a change at the next reload; --access-rules with
// rules that do not compile is a usage error.
func TestSuperviseAccessRules(t *testing.T) {
	t.Parallel()
	write := func(path string, rules any) {
		data, err := json.Marshal(map[string]any{
			"mcpServers": map[string]any{"a": mock(binPath), "b": mock(binPath)},
			"access":     rules,
		})
		require.NoError(t, err)
		tmp := path + ".tmp"
		require.NoError(t, os.WriteFile(tmp, data, 0o644))
		require.NoError(t, os.Rename(tmp, path))
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.json")
	// An empty match: every caller, the anonymous one too.
	write(cfg, []any{map[string]any{"servers": map[string]any{"allow": []string{"a"}}}})

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`[{"tools": {"deny": ["a["]}}]`), 0o644))
	r := cli(t, "supervise", "--config", cfg, "--listen", "127.0.0.1:0", "--access-rules", bad)
	assert.Equal(t, 2, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stderr, "invalid access rules")

	cmd := exec.Command(binPath, "supervise", "--config", cfg, "--listen", "127.0.0.1:0")
	p := startLogged(t, cmd)
	base := gatewayURL(t, p.logs)
	p.logs.waitFor(t, testwait.Patience, "both servers ready", func(lines []map[string]any) bool {
		ready := map[any]bool{}
		for _, m := range lines {
			if m["message"] == "server state" && m["state"] == "ready" {
				ready[m["server"]] = true
			}
		}
		return ready["a"] && ready["b"]
	})
	body := statelessToolCall(base, 1, "mcp__a__echo", `{"text":"free"}`)
	assert.Contains(t, body, `"text":"free"`, body)
	body = statelessToolCall(base, 2, "mcp__b__echo", `{"text":"x"}`)
	assert.Contains(t, body, `"code":-32054`, body)

	// The rules change on reload: b now, a no more.
	write(cfg, map[string]any{"rules": []any{map[string]any{"servers": map[string]any{"allow": []string{"b"}}}}})
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	p.logs.waitFor(t, testwait.Patience, "the reload", func(lines []map[string]any) bool {
		for _, m := range lines {
			if m["message"] == "config reloaded (SIGHUP)" {
				return true
			}
		}
		return false
	})
	body = statelessToolCall(base, 3, "mcp__b__echo", `{"text":"now"}`)
	assert.Contains(t, body, `"text":"now"`, body)
	body = statelessToolCall(base, 4, "mcp__a__echo", `{"text":"x"}`)
	assert.Contains(t, body, `"code":-32054`, body)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t), "log:\n%s", p.logs)
}
