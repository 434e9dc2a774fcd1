package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trust shows the sandbox each pending entry would run under: none, or
// the mechanism with its paths (as written), network and memory limit;
// --json carries the same.
func TestTrustShowsTheSandbox(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/etc/mcpvisor/managed-mcp.json"); err == nil {
		t.Skip("a managed config file exists on this machine and would win")
	}
	home, project := t.TempDir(), t.TempDir()
	env := []string{"HOME=" + home, envStateDir + "=" + t.TempDir()}
	require.NoError(t, os.WriteFile(filepath.Join(project, ".mcp.json"), []byte(`{"mcpServers": {
		"confined": {"command": "srv", "sandbox": {"write": ["./out", "~/.npm"], "read": ["~/data"], "memoryMB": 512, "mechanism": "landlock"}},
		"defaults": {"command": "srv", "sandbox": true},
		"off":      {"command": "srv", "sandbox": false},
		"plain":    {"command": "srv"},
		"remote":   {"url": "http://127.0.0.1:1/mcp"}}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(project, ".mcp.local.json"), []byte(`{"sandbox": {"network": true},
		"mcpServers": {"local": {"command": "srv"}}}`), 0o644))

	r := cliIn(t, project, env, "trust", "--list")
	require.Equal(t, 0, r.code, r.stderr)
	for _, want := range []string{
		"  Sandbox: landlock; write ./out, ~/.npm; read ~/data; no network; memory 512 MB\n",
		"  Sandbox: auto; write none; read none; no network; memory 2048 MB\n",
		"  Sandbox: none (\"sandbox\": false): it would run unconfined\n",
		"  Sandbox: none: it would run unconfined\n",
		"  Sandbox: none (a remote server runs nothing here)\n",
		"  Sandbox: auto; write none; read none; network allowed; memory 2048 MB\n", // the local file's default
	} {
		assert.Contains(t, r.stdout, want)
	}

	r = cliIn(t, project, env, "trust", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var shown trustJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &shown))
	got := map[string]*sandboxJSON{}
	for _, s := range shown.Servers {
		got[s.Name] = s.Sandbox
	}
	require.Len(t, got, 6)
	assert.Equal(t, &sandboxJSON{Mechanism: "landlock", Write: []string{"./out", "~/.npm"}, Read: []string{"~/data"},
		MemoryMB: 512, Processes: 256, OpenFiles: 4096}, got["confined"])
	assert.Equal(t, &sandboxJSON{Mechanism: "auto", Write: []string{}, Read: []string{}, MemoryMB: 2048, Processes: 256, OpenFiles: 4096}, got["defaults"])
	assert.Equal(t, &sandboxJSON{Mechanism: "auto", Write: []string{}, Read: []string{}, Network: true, MemoryMB: 2048, Processes: 256, OpenFiles: 4096}, got["local"])
	for _, name := range []string{"off", "plain", "remote"} {
		assert.Nil(t, got[name], name)
	}
	assert.Contains(t, r.stdout, `"sandbox": null`, "no sandbox is null, not absent")
}

// The approval covers the file's default sandbox: turning it off after
// approval holds the server again, and trust shows what changed.
func TestTrustShowsWhatTheLaunchChanged(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/etc/mcpvisor/managed-mcp.json"); err == nil {
		t.Skip("a managed config file exists on this machine and would win")
	}
	home, project, state := t.TempDir(), realTempDir(t), t.TempDir()
	env := []string{"HOME=" + home, envStateDir + "=" + state}
	write := func(top string) {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(project, ".mcp.json"),
			[]byte(`{`+top+`"mcpServers": {"s": {"command": "sh", "args": ["-c", "exit 3"]}}}`), 0o600))
	}
	write(`"sandbox": {"write": ["./out"]}, `)
	r := cliIn(t, project, env, "trust", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Approved 1 of 1.")
	r = cliIn(t, project, env, "trust", "--list")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Nothing waits for approval.")

	write(`"sandbox": false, `)
	r = cliIn(t, project, env, "trust", "--list")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "changed since you approved it")
	assert.Contains(t, r.stdout, "what it launches changed:")
	assert.Contains(t, r.stdout, "sandbox.enabled: true → false")
	r = cliIn(t, project, env, "list", "--json")
	assert.Equal(t, 1, r.code)
	out := decodeList(t, r.stdout)
	require.Len(t, out.Servers, 1)
	assert.Equal(t, "needs-approval", out.Servers[0].State)
	assert.Contains(t, out.Servers[0].Error, "what it launches differs (sandbox.enabled")
}
