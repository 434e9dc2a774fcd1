package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
)

// A project layer (approved) may add servers and rules, but cannot make
// a server more trusted than the user's config makes it, nor turn off
// its sandbox; its allow rules are dropped.
func TestProjectLayerCannotRaiseTrust(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	writeFile(t, home, ".mcp.json", `{
	  "mcpServers": {
	    "boxed":   {"command": "b", "sandbox": {"write": ["/tmp/boxed-out"]}},
	    "bytrust": {"command": "t", "trust": "sandbox"},
	    "wary":    {"command": "w", "trust": "untrusted"},
	    "plain":   {"command": "p"},
	    "vetted":  {"command": "v", "trust": "trusted"}
	  },
	  "permissions": {"allow": ["mcp__plain__*"], "deny": ["mcp__*__drop_*"]}
	}`)
	writeFile(t, dir, ".mcp.json", `{
	  "mcpServers": {
	    "boxed":   {"command": "b", "sandbox": false, "trust": "trusted"},
	    "bytrust": {"command": "t"},
	    "wary":    {"command": "w", "trust": "trusted"},
	    "plain":   {"command": "p", "trust": "trusted"},
	    "vetted":  {"command": "v", "trust": "trusted"},
	    "newcomer":{"command": "n", "trust": "trusted"},
	    "remote":  {"url": "https://r.example/mcp", "trust": "untrusted"}
	  },
	  "permissions": {"allow": ["mcp__*"], "ask": ["mcp__*__delete_*"], "deny": ["mcp__wary__*"]}
	}`)
	writeFile(t, dir, ".mcp.local.json", `{"mcpServers": {"wary": {"command": "w", "trust": "sandbox"}}}`)

	cfg, err := Load(Options{Home: home, Dir: dir, ManagedFile: noManaged(t), Approvals: approveAll{}})
	require.NoError(t, err)
	trustOf := func(name string) string { return cfg.Servers[name].Trust }

	// Trust: at most the user's.
	assert.Equal(t, "", trustOf("boxed"), `the user gave "boxed" the default level`)
	assert.Equal(t, mcpvisor.TrustSandbox, trustOf("bytrust"), "the project's entry has no trust; the user's sandbox level is the ceiling")
	assert.Equal(t, mcpvisor.TrustUntrusted, trustOf("wary"), "the local layer cannot lift the user's untrusted either")
	assert.Equal(t, "", trustOf("plain"))
	assert.Equal(t, mcpvisor.TrustTrusted, trustOf("vetted"), "what the user trusts stays trusted")
	assert.Equal(t, "", trustOf("newcomer"), "a project cannot mark its own new server trusted")
	assert.Equal(t, mcpvisor.TrustUntrusted, trustOf("remote"), "lowering is fine")
	for _, name := range []string{"boxed", "wary", "plain", "newcomer"} {
		assert.Contains(t, cfg.Lowered, name)
	}
	assert.NotContains(t, cfg.Lowered, "vetted")
	assert.NotContains(t, cfg.Lowered, "remote")
	assert.Contains(t, cfg.Lowered["newcomer"], `trust "trusted" lowered to ""`)

	// Sandbox: the user's stays on.
	boxed := cfg.Servers["boxed"].Sandbox
	require.NotNil(t, boxed, `"sandbox": false in the project does not turn the user's off`)
	assert.True(t, boxed.Enabled)
	assert.Equal(t, []string{"/tmp/boxed-out"}, boxed.Write, "the user's sandbox, as the user wrote it")
	assert.Contains(t, cfg.Lowered["boxed"], "sandbox kept")
	bytrust := cfg.Servers["bytrust"].Sandbox
	require.NotNil(t, bytrust, `trust "sandbox" in the user's entry confines the project's too`)
	assert.True(t, bytrust.Enabled)
	assert.Nil(t, cfg.Servers["plain"].Sandbox)

	// Rules: the project's ask and deny join; its allow does not.
	assert.Equal(t, []string{"mcp__plain__*"}, cfg.Permissions.Allow)
	assert.Equal(t, []string{"mcp__*__delete_*"}, cfg.Permissions.Ask)
	assert.Equal(t, []string{"mcp__*__drop_*", "mcp__wary__*"}, cfg.Permissions.Deny)

	// Without the project files the user's entries are as written.
	cfg, err = Load(Options{Home: home, Dir: t.TempDir(), ManagedFile: noManaged(t)})
	require.NoError(t, err)
	assert.Equal(t, mcpvisor.TrustSandbox, cfg.Servers["bytrust"].Trust)
	require.NotNil(t, cfg.Servers["bytrust"].Sandbox, `trust "sandbox" is "sandbox": true`)
	assert.True(t, cfg.Servers["bytrust"].Sandbox.Enabled)
	assert.Empty(t, cfg.Lowered)
}

// Trust levels and rules are validated: a clear config error, naming the
// member.
func TestTrustAndPermissionsAreValidated(t *testing.T) {
	for name, tc := range map[string]struct{ file, want string }{
		"unknown level":       {`{"mcpServers": {"s": {"command": "c", "trust": "yes"}}}`, `trust "yes": want "trusted", "untrusted" or "sandbox"`},
		"sandbox and false":   {`{"mcpServers": {"s": {"command": "c", "trust": "sandbox", "sandbox": false}}}`, `"sandbox": false`},
		"remote sandbox":      {`{"mcpServers": {"s": {"url": "https://x.example", "trust": "sandbox"}}}`, "stdio servers only"},
		"bad glob":            {`{"mcpServers": {}, "permissions": {"deny": ["mcp__[x"]}}`, `permissions.deny[0] "mcp__[x"`},
		"unknown rule member": {`{"mcpServers": {}, "permissions": {"always": ["x"]}}`, `unknown field "always"`},
	} {
		t.Run(name, func(t *testing.T) {
			file := writeFile(t, t.TempDir(), "c.json", tc.file)
			_, err := Load(Options{Files: []string{file}, ManagedFile: noManaged(t)})
			require.Error(t, err)
			var ce *Error
			require.ErrorAs(t, err, &ce)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
