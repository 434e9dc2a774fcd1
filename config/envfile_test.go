package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/trust"
)

// An entry's envFile (VS Code's) is read relative to the config file that
// names it and merged under the entry's own env, which wins.
func TestEnvFileIsReadRelativeToTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "conf", "secrets"), 0o755))
	writeFile(t, filepath.Join(dir, "conf", "secrets"), "app.env", "# the app's settings\n"+
		"export API_KEY=abc123\n"+
		"MODE=from-file\n"+
		"QUOTED=\"two\\nlines \\\"quoted\\\"\"\n"+
		"SINGLE='kept $AS \\n written'\n"+
		"SPACED =  padded value # a comment\n"+
		"MULTI=\"first\nsecond\"\n"+
		"EMPTY=\n")
	file := writeFile(t, filepath.Join(dir, "conf"), "mcp.json", `{"servers": {
		"app": {"type": "stdio", "command": "app", "envFile": "secrets/app.env", "env": {"MODE": "from-entry"}},
		"abs": {"command": "app", "envFile": "${workspaceFolder}/conf/secrets/app.env"}
	}}`)
	cfg, err := Load(Options{Files: []string{file}, Dir: dir, ManagedFile: noManaged(t), LookupEnv: fakeEnv(nil)})
	require.NoError(t, err)
	app := cfg.Servers["app"]
	assert.Equal(t, map[string]string{
		"API_KEY": "abc123",
		"MODE":    "from-entry", // the entry's env wins
		"QUOTED":  "two\nlines \"quoted\"",
		"SINGLE":  `kept $AS \n written`,
		"SPACED":  "padded value",
		"MULTI":   "first\nsecond",
		"EMPTY":   "",
	}, app.Env)
	assert.Equal(t, filepath.Join(dir, "conf", "secrets", "app.env"), app.EnvFile, "resolved against the config file's directory")
	assert.Equal(t, "from-file", cfg.Servers["abs"].Env["MODE"])
	assert.Equal(t, filepath.Join(dir, "conf", "secrets", "app.env"), cfg.Servers["abs"].EnvFile)
}

// A missing or malformed envFile fails the load with a *Error at
// the entry's envFile that names the line, never a value; envFile on a
// remote server is an error.
func TestEnvFileErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "bad.env", "OK=1\nTOKEN=\"sup3r-secret\nNEVER CLOSED\n")
	writeFile(t, dir, "nokey.env", "=value\n")
	for _, tc := range []struct {
		entry, want string
	}{
		{`{"command": "x", "envFile": "missing.env"}`, "missing.env: no such file or directory"},
		{`{"command": "x", "envFile": "bad.env"}`, "line 2: TOKEN: no closing double quote"},
		{`{"command": "x", "envFile": "nokey.env"}`, "line 1: want KEY=VALUE"},
		{`{"url": "https://example.com/mcp", "envFile": "bad.env"}`, "envFile applies to stdio servers only"},
	} {
		file := writeFile(t, dir, "mcp.json", `{"mcpServers": {"s": `+tc.entry+`}}`)
		_, err := Load(Options{Files: []string{file}, ManagedFile: noManaged(t)})
		require.Error(t, err, tc.entry)
		var ce *Error
		require.ErrorAs(t, err, &ce)
		assert.Contains(t, err.Error(), tc.want)
		assert.NotContains(t, err.Error(), "sup3r", "no value is quoted")
		if !strings.Contains(tc.entry, "url") {
			assert.Equal(t, "mcpServers.s.envFile", ce.Path)
			assert.True(t, errors.Is(err, ErrEnvFile))
		}
	}
}

// A project layer's entry with an envFile is held until approved, and the
// file is not applied meanwhile; the approval covers the file's contents:
// an edit of the file (a new NODE_OPTIONS, say) holds the server again.
func TestProjectEnvFileNeedsApproval(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := trust.NewStore(t.TempDir(), nil)
	dir := t.TempDir()
	writeFile(t, dir, ".env", "API_URL=https://api.example.com\n")
	writeFile(t, dir, ".mcp.json", `{"mcpServers": {"app": {"command": "app", "envFile": "${workspaceFolder}/.env"}}}`)
	load := func() *Config {
		t.Helper()
		cfg, err := Load(Options{Home: t.TempDir(), Dir: dir, ManagedFile: noManaged(t), LookupEnv: fakeEnv(nil), Approvals: store})
		require.NoError(t, err)
		return cfg
	}

	cfg := load()
	require.Contains(t, cfg.Pending, "app", "held like any project entry")
	assert.Empty(t, cfg.Servers["app"].Env, "the file is not applied before approval")
	p := cfg.Pending["app"]
	assert.Equal(t, filepath.Join(dir, ".env"), p.EnvFile)
	assert.Equal(t, []string{"API_URL"}, p.EnvFileVariables, "the names it sets are shown, not the values")
	approval, err := cfg.Approval("app")
	require.NoError(t, err)
	require.NotNil(t, approval.Launch, "the approval covers what the entry launches: the file too")
	assert.Contains(t, approval.Launch.Fields, `env["API_URL"]`)
	assert.NotContains(t, approval.Launch.Fields[`env["API_URL"]`], "api.example.com", "values are kept as digests")
	require.NoError(t, store.Approve(ctx, approval))

	cfg = load()
	assert.Empty(t, cfg.Pending)
	assert.Equal(t, "https://api.example.com", cfg.Servers["app"].Env["API_URL"], "approved: the file applies")

	writeFile(t, dir, ".env", "API_URL=https://api.example.com\nNODE_OPTIONS=--require ./evil.js\n")
	cfg = load()
	require.Contains(t, cfg.Pending, "app", "a changed envFile needs a new approval")
	assert.True(t, cfg.Pending["app"].Changed)
	assert.Empty(t, cfg.Servers["app"].Env)
	assert.Equal(t, []string{"API_URL", "NODE_OPTIONS"}, cfg.Pending["app"].EnvFileVariables)
	assert.Contains(t, strings.Join(cfg.Pending["app"].LaunchChanges, "\n"), `env["NODE_OPTIONS"]: added`)
}
