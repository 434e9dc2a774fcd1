package config

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
)

// sandboxPolicyLayers writes a user and a project layer with servers
// that set no sandbox, "sandbox": false and a sandbox of their own, and
// a managed file holding policy; it returns the options loading them.
func sandboxPolicyLayers(t *testing.T, policy string, approvals Approvals) Options {
	t.Helper()
	home, project := t.TempDir(), t.TempDir()
	writeFile(t, home, ".mcp.json", `{"sandbox": false, "mcpServers": {
		"user-plain": {"command": "u"},
		"user-off":   {"command": "u", "sandbox": false}}}`)
	writeFile(t, project, ".mcp.json", `{"mcpServers": {
		"plain":  {"command": "p"},
		"off":    {"command": "p", "sandbox": false},
		"own":    {"command": "p", "sandbox": {"network": true, "mechanism": "landlock"}},
		"remote": {"url": "http://127.0.0.1:1/mcp"}}}`)
	writeFile(t, project, ".mcp.local.json", `{"sandbox": false, "mcpServers": {"local-default-off": {"command": "l"}}}`)
	managed := noManaged(t)
	if policy != "" {
		managed = writeFile(t, t.TempDir(), "managed-mcp.json", policy)
	}
	return Options{Home: home, Dir: project, ManagedFile: managed, Approvals: approvals}
}

// requireSandbox "project": a project server without a sandbox gets the
// default one, one that sets "sandbox": false (in its entry or as its
// file's default) is excluded with the reason, one with its own sandbox
// keeps it; user servers and remote servers are not affected, and
// neither the user layer's default nor a host's policy lifts it.
func TestRequireSandboxProject(t *testing.T) {
	t.Parallel()
	opts := sandboxPolicyLayers(t, `{"requireSandbox": "project"}`, approveAll{})
	opts.Policy = &Policy{} // a host's policy requiring nothing lifts nothing
	cfg, err := Load(opts)
	require.NoError(t, err)

	assert.Equal(t, &transports.Sandbox{Enabled: true}, cfg.Servers["plain"].Sandbox, "the default sandbox")
	assert.Equal(t, &transports.Sandbox{Enabled: true, Network: true, Mechanism: transports.SandboxLandlock},
		cfg.Servers["own"].Sandbox, "its own sandbox, unchanged")
	assert.Nil(t, cfg.Servers["remote"].Sandbox, "a remote server runs nothing here")
	for _, name := range []string{"off", "local-default-off"} {
		assert.NotContains(t, cfg.Servers, name)
		assert.Contains(t, cfg.Excluded[name], opts.ManagedFile+`: requireSandbox is "project"`, name)
		assert.Contains(t, cfg.Excluded[name], `sets "sandbox": false and may not run unconfined`, name)
	}
	assert.Equal(t, &transports.Sandbox{}, cfg.Servers["user-plain"].Sandbox, "the user's own servers keep their choice")
	assert.Equal(t, &transports.Sandbox{}, cfg.Servers["user-off"].Sandbox)

	// The control: without the policy nothing is confined or excluded.
	opts.ManagedFile = noManaged(t)
	cfg, err = Load(opts)
	require.NoError(t, err)
	assert.Nil(t, cfg.Servers["plain"].Sandbox)
	assert.Equal(t, &transports.Sandbox{}, cfg.Servers["off"].Sandbox)
	assert.Empty(t, cfg.Excluded)
}

// requireSandbox "all" covers the user's servers too; a host's
// Options.Policy can require it by itself.
func TestRequireSandboxAll(t *testing.T) {
	t.Parallel()
	opts := sandboxPolicyLayers(t, "", approveAll{})
	opts.Policy = &Policy{RequireSandbox: RequireSandboxAll}
	cfg, err := Load(opts)
	require.NoError(t, err)
	assert.Equal(t, []string{"local-default-off", "off", "user-off", "user-plain"}, sortedKeys(cfg.Excluded))
	assert.Contains(t, cfg.Excluded["user-off"], PolicyOptionSource+`: requireSandbox is "all"`)
	assert.Equal(t, &transports.Sandbox{Enabled: true}, cfg.Servers["plain"].Sandbox)
	assert.Nil(t, cfg.Servers["remote"].Sandbox)
}

// A held entry shows the sandbox it would run under, with the policy
// applied; a held entry that sets "sandbox": false is excluded at once
// (no approval could let it run).
func TestRequireSandboxHeld(t *testing.T) {
	t.Parallel()
	opts := sandboxPolicyLayers(t, `{"requireSandbox": "project"}`, nil)
	cfg, err := Load(opts)
	require.NoError(t, err)
	require.Contains(t, cfg.Pending, "plain")
	assert.Equal(t, &transports.Sandbox{Enabled: true}, cfg.Pending["plain"].Sandbox)
	assert.Equal(t, opts.ManagedFile, cfg.Pending["plain"].SandboxRequiredBy)
	assert.Equal(t, &transports.Sandbox{Enabled: true, Network: true, Mechanism: transports.SandboxLandlock}, cfg.Pending["own"].Sandbox)
	assert.Equal(t, opts.ManagedFile, cfg.Pending["own"].SandboxRequiredBy)
	assert.Nil(t, cfg.Pending["remote"].Sandbox)
	assert.Empty(t, cfg.Pending["remote"].SandboxRequiredBy)
	assert.Contains(t, cfg.Excluded, "off")
	assert.Contains(t, cfg.Excluded, "local-default-off")
	assert.NotContains(t, cfg.Pending, "off")

	// Without the policy a held entry shows its own sandbox, or its
	// file's default, as written.
	opts.ManagedFile = noManaged(t)
	cfg, err = Load(opts)
	require.NoError(t, err)
	assert.Nil(t, cfg.Pending["plain"].Sandbox)
	assert.Equal(t, &transports.Sandbox{}, cfg.Pending["off"].Sandbox)
	assert.Equal(t, &transports.Sandbox{}, cfg.Pending["local-default-off"].Sandbox, "the file's default")
}

// A malformed requireSandbox is a config error of the managed file.
func TestRequireSandboxInvalid(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ policy, want string }{
		{`{"requireSandbox": "yes"}`, `requireSandbox: "yes": want "project" or "all"`},
		{`{"requireSandbox": true}`, `requireSandbox: want string, got boolean`},
	} {
		opts := sandboxPolicyLayers(t, tt.policy, approveAll{})
		_, err := Load(opts)
		var ce *Error
		require.True(t, errors.As(err, &ce), "%v", err)
		assert.Equal(t, opts.ManagedFile, ce.File)
		assert.Contains(t, err.Error(), tt.want)
	}
	err := (&Policy{RequireSandbox: "some"}).Validate()
	assert.ErrorContains(t, err, `requireSandbox: "some"`)
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A held entry is not expanded, so its sandbox paths are still as
// written (relative, ~, ${VAR}): it loads, held, and shows them; a bad
// sandbox value is still an error before approval (its file is skipped,
// and says why).
func TestHeldEntryWithSandboxPaths(t *testing.T) {
	t.Parallel()
	project := t.TempDir()
	writeFile(t, project, ".mcp.json", `{"mcpServers": {"p": {"command": "p",
		"sandbox": {"write": ["./out", "~/.npm", "${OUT}/x"], "read": ["data"]}}}}`)
	opts := Options{Home: t.TempDir(), Dir: project, ManagedFile: noManaged(t)}
	cfg, err := Load(opts)
	require.NoError(t, err)
	require.Contains(t, cfg.Pending, "p")
	assert.Equal(t, &transports.Sandbox{Enabled: true, Write: []string{"./out", "~/.npm", "${OUT}/x"}, Read: []string{"data"}},
		cfg.Pending["p"].Sandbox, "as written")

	writeFile(t, project, ".mcp.json", `{"mcpServers": {"p": {"command": "p", "sandbox": {"write": ["./out", ""]}}}}`)
	cfg, err = Load(opts)
	require.NoError(t, err, "a project file that does not load is skipped, not fatal")
	require.Len(t, cfg.Skipped, 1, "the project file is skipped and says why")
	assert.ErrorIs(t, cfg.Skipped[0].Err(), transports.ErrInvalidSandbox)
	assert.ErrorContains(t, cfg.Skipped[0].Err(), "write[1] is empty")
	assert.NotContains(t, cfg.Pending, "p")
}

// Config.Check, which vets a server a host adds at runtime, refuses an
// unconfined stdio server under requireSandbox "all".
func TestCheckRequireSandboxAll(t *testing.T) {
	t.Parallel()
	cfg := &Config{Policies: []Policy{{RequireSandbox: RequireSandboxAll, Source: "host"}}}
	ok, reason := cfg.Check("x", stdio("x"))
	assert.False(t, ok)
	assert.Equal(t, `host: requireSandbox is "all": a stdio server must have an enabled "sandbox"`, reason)
	confined := stdio("x")
	confined.Sandbox = &transports.Sandbox{Enabled: true}
	ok, _ = cfg.Check("x", confined)
	assert.True(t, ok)
	remote := mcpvisor.ServerConfig{Config: transports.Config{URL: "http://127.0.0.1:1/mcp"}}
	ok, _ = cfg.Check("r", remote)
	assert.True(t, ok, "a remote server runs nothing here")
	project := &Config{Policies: []Policy{{RequireSandbox: RequireSandboxProject}}}
	ok, _ = project.Check("x", stdio("x"))
	assert.True(t, ok, `"project" concerns layers, which Check does not see`)
}
