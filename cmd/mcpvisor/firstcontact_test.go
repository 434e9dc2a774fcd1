package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/interop"
)

// "disabled": true loads disabled in every layer, with or without a
// command, approved or not: list shows the entries disabled and exits 0.
func TestListShowsDisabledEntriesOfEveryLayer(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/etc/mcpvisor/managed-mcp.json"); err == nil {
		t.Skip("a managed config file exists on this machine and would win")
	}
	home, project := t.TempDir(), t.TempDir()
	write := func(path string, servers map[string]any) {
		data, err := json.Marshal(map[string]any{"mcpServers": servers})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, data, 0o644))
	}
	off := map[string]any{"disabled": true}
	write(filepath.Join(home, ".mcp.json"), map[string]any{"user-off": off})
	write(filepath.Join(project, ".mcp.json"), map[string]any{
		"project-off":         off,
		"project-off-command": map[string]any{"command": "mcpvisor-no-such-server", "disabled": true},
		"project-off-envfile": map[string]any{"command": "x", "envFile": "missing.env", "disabled": true},
	})
	write(filepath.Join(project, ".mcp.local.json"), map[string]any{"local-off": off})
	want := []string{"local-off", "project-off", "project-off-command", "project-off-envfile", "user-off"}

	for _, args := range [][]string{{"list", "--json"}, {"list", "--json", "--trust-project"}} {
		r := cliIn(t, project, []string{"HOME=" + home}, args...)
		require.Equal(t, 0, r.code, "%v: stderr: %s", args, r.stderr)
		assert.NotContains(t, r.stderr, "rejected", args)
		out := decodeList(t, r.stdout)
		var names []string
		for _, s := range out.Servers {
			names = append(names, s.Name)
			assert.Equal(t, "disabled", s.State, "%v: %s", args, s.Name)
		}
		slices.Sort(names)
		assert.Equal(t, want, names, args)
	}
	r := cliIn(t, project, []string{"HOME=" + home}, "list")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Regexp(t, `(?m)^project-off +disabled `, r.stdout)
}

// everythingBin returns server-everything's binary (make test sets
// MCPVISOR_SERVER_EVERYTHING; else the one make deps installs), or skips
// the test (fails it with MCPVISOR_REQUIRE_INTEROP set).
func everythingBin(t *testing.T) string {
	t.Helper()
	path := os.Getenv("MCPVISOR_SERVER_EVERYTHING")
	if path == "" {
		path = "../../.deps/npm/node_modules/.bin/mcp-server-everything"
	}
	abs, err := filepath.Abs(path)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		msg := "server-everything is missing (make npm-deps installs it)"
		interop.Missing(t, msg)
	}
	return abs
}

// list, call and supervise present one client identity to a server:
// server-everything offers tools only to clients that declare sampling,
// elicitation or roots, and what list pinned is what supervise finds,
// so nothing is withheld as new on a known server and nothing is logged
// as changed, and a second list sees the same tools as the first.
func TestOneIdentityTowardsServers(t *testing.T) {
	t.Parallel()
	bin := everythingBin(t)
	env := []string{envStateDir + "=" + t.TempDir()}
	cfg := writeConfig(t, map[string]any{"everything": map[string]any{"command": bin}})
	toolsOf := func(out listOut) []string {
		var names []string
		for _, tl := range out.Tools {
			names = append(names, tl.Tool)
		}
		slices.Sort(names)
		return names
	}

	r := cliIn(t, "", env, "list", "--json", "--config", cfg)
	require.Equal(t, 0, r.code, r.stderr)
	first := toolsOf(decodeList(t, r.stdout))
	assert.Contains(t, first, "trigger-sampling-request", "list presents the sampling capability")
	assert.Contains(t, first, "get-roots-list", "list presents the roots capability")

	c := cliIn(t, "", env, "call", "--config", cfg, "mcp__everything__echo", `{"message":"hi"}`)
	require.Equal(t, 0, c.code, c.stderr)
	assert.Contains(t, c.stdout, "hi")

	sv := startSupervise(t, "", env, "--config", cfg)
	require.Eventually(t, func() bool {
		state, _ := sv.serverState(t, "everything")
		return state == "ready"
	}, 60*time.Second, 50*time.Millisecond, "server-everything ready under supervise")
	// A pin warning is logged before the view with the server's lists is
	// published: by now it would be there.
	assert.Empty(t, sv.withheldOf(t, "everything"), "nothing withheld")
	sv.stop(t)
	sv.logs.mu.Lock()
	for _, m := range sv.logs.lines {
		assert.NotEqual(t, "tool definition not pinned", m["message"], "logged as changed: %v", m)
		assert.Nil(t, m["diff"], "logged with a diff: %v", m)
	}
	sv.logs.mu.Unlock()

	r = cliIn(t, "", env, "list", "--json", "--config", cfg)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, first, toolsOf(decodeList(t, r.stdout)), "the second list sees what the first did")
	assert.False(t, strings.Contains(r.stderr, "not pinned"), r.stderr)
}
