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

// The permission rules and trust levels of the config reach the gateway:
// a denied tool and an untrusted server's tool (asked of a client that
// declared no elicitation) are refused with -32053, the others answer; a
// reload applies changed rules. mcpvisor call applies them too.
func TestSupervisePermissionRules(t *testing.T) {
	t.Parallel()
	write := func(path string, permissions map[string]any) {
		data, err := json.Marshal(map[string]any{
			"mcpServers": map[string]any{
				"a": mock(binPath),
				"w": map[string]any{"command": binPath, "args": []string{"mock"}, "trust": "untrusted"},
			},
			"permissions": permissions,
		})
		require.NoError(t, err)
		tmp := path + ".tmp"
		require.NoError(t, os.WriteFile(tmp, data, 0o644))
		require.NoError(t, os.Rename(tmp, path))
	}
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	write(cfg, map[string]any{"deny": []string{"mcp__a__add"}})

	r := cli(t, "call", "--config", cfg, "mcp__a__add", `{"a":1,"b":2}`)
	assert.NotEqual(t, 0, r.code, "a denied call fails the command; stdout %s", r.stdout)
	assert.Contains(t, r.stderr, `deny rule \"mcp__a__add\"`)

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
		return ready["a"] && ready["w"]
	})

	body := statelessToolCall(base, 1, "mcp__a__add", `{"a":1,"b":2}`)
	assert.Contains(t, body, `"code":-32053`, body)
	assert.Contains(t, body, "deny rule", body)
	body = statelessToolCall(base, 2, "mcp__w__echo", `{"text":"x"}`)
	assert.Contains(t, body, `"code":-32053`, body)
	assert.Contains(t, body, "declared no elicitation", body)
	body = statelessToolCall(base, 3, "mcp__a__echo", `{"text":"free"}`)
	assert.Contains(t, body, `"text":"free"`, body)

	// The rules change on reload: add is allowed now.
	write(cfg, map[string]any{"ask": []string{"mcp__*__delete_*"}})
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	p.logs.waitFor(t, testwait.Patience, "the reload", func(lines []map[string]any) bool {
		for _, m := range lines {
			if m["message"] == "config reloaded (SIGHUP)" {
				return true
			}
		}
		return false
	})
	body = statelessToolCall(base, 4, "mcp__a__add", `{"a":1,"b":2}`)
	assert.Contains(t, body, `"text":"3"`, body)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t), "log:\n%s", p.logs)
}
