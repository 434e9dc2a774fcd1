package config

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
)

// The sandbox member: true, false or an object; paths expand ~ and
// ${VAR} and are relative to the config file; a top-level "sandbox" is
// the default of the file's stdio servers.
func TestLoadConfigSandbox(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, ".mcp.json", `{
		"sandbox": {"network": true},
		"mcpServers": {
			"plain":    {"command": "x"},
			"optout":   {"command": "x", "sandbox": false},
			"on":       {"command": "x", "sandbox": true},
			"remote":   {"url": "http://h/mcp"},
			"detailed": {"command": "x", "sandbox": {
				"write": ["./out", "~/.npm", "${DATA}/w"], "read": ["~/work/data", "/abs/r"],
				"network": false, "memoryMB": 512, "processes": 64, "openFiles": 256, "mechanism": "landlock"}}
		}}`)
	cfg, err := Load(Options{Files: []string{file}, Home: "/home/ada", ManagedFile: noManaged(t),
		LookupEnv: fakeEnv(map[string]string{"DATA": "/srv/data"})})
	require.NoError(t, err)

	assert.Equal(t, &transports.Sandbox{Enabled: true, Network: true}, cfg.Servers["plain"].Sandbox,
		"the file's default applies to a stdio server without its own")
	assert.Equal(t, &transports.Sandbox{}, cfg.Servers["optout"].Sandbox, `"sandbox": false opts out`)
	assert.Equal(t, &transports.Sandbox{Enabled: true}, cfg.Servers["on"].Sandbox, `"sandbox": true is every default`)
	assert.Nil(t, cfg.Servers["remote"].Sandbox, "the default is for stdio servers")
	assert.Equal(t, &transports.Sandbox{
		Enabled:   true,
		Write:     []string{filepath.Join(dir, "out"), "/home/ada/.npm", "/srv/data/w"},
		Read:      []string{"/home/ada/work/data", "/abs/r"},
		MemoryMB:  512,
		Processes: 64,
		OpenFiles: 256,
		Mechanism: transports.SandboxLandlock,
	}, cfg.Servers["detailed"].Sandbox)

	// The JSON form round-trips.
	b, err := json.Marshal(cfg.Servers["on"].Sandbox)
	require.NoError(t, err)
	assert.Equal(t, "true", string(b))
	b, err = json.Marshal(cfg.Servers["optout"].Sandbox)
	require.NoError(t, err)
	assert.Equal(t, "false", string(b))
	var back transports.Sandbox
	b, err = json.Marshal(cfg.Servers["detailed"].Sandbox)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, cfg.Servers["detailed"].Sandbox, &back)
}

// An unknown or invalid sandbox value is an error, never ignored: a typo
// must not leave a server less confined than its author meant.
func TestLoadConfigSandboxErrors(t *testing.T) {
	tests := []struct {
		name     string
		content  string
		wantPath string
		wantErr  string
	}{
		{"unknown member", `{"mcpServers": {"a": {"command": "x", "sandbox": {"netwrok": false}}}}`,
			"mcpServers.a.sandbox", `unknown field "netwrok"`},
		{"string", `{"mcpServers": {"a": {"command": "x", "sandbox": "yes"}}}`,
			"mcpServers.a.sandbox", "want true, false or an object, got string"},
		{"number", `{"mcpServers": {"a": {"command": "x", "sandbox": 1}}}`,
			"mcpServers.a.sandbox", "want true, false or an object, got number"},
		{"memory as a string", `{"mcpServers": {"a": {"command": "x", "sandbox": {"memoryMB": "512"}}}}`,
			"mcpServers.a.sandbox", "memoryMB: want int, got string"},
		{"negative memory", `{"mcpServers": {"a": {"command": "x", "sandbox": {"memoryMB": -1}}}}`,
			"mcpServers.a.sandbox", "memoryMB must not be negative"},
		{"unknown mechanism", `{"mcpServers": {"a": {"command": "x", "sandbox": {"mechanism": "docker"}}}}`,
			"mcpServers.a.sandbox", `mechanism "docker"`},
		{"write not a list", `{"mcpServers": {"a": {"command": "x", "sandbox": {"write": "./out"}}}}`,
			"mcpServers.a.sandbox", "write: want []string, got string"},
		{"empty path", `{"mcpServers": {"a": {"command": "x", "sandbox": {"read": [""]}}}}`,
			"mcpServers.a.sandbox", "read[0] is empty"},
		{"unset variable in a path", `{"mcpServers": {"a": {"command": "x", "sandbox": {"write": ["${NOPE}/x"]}}}}`,
			"mcpServers.a.sandbox.write[0]", "${NOPE}"},
		{"on a remote server", `{"servers": {"a": {"url": "http://h", "sandbox": true}}}`,
			"servers.a", `"sandbox" confines stdio servers only`},
		{"bad file default", `{"sandbox": {"mechanism": "x"}, "mcpServers": {"a": {"command": "x"}}}`,
			"sandbox", `mechanism "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := writeFile(t, t.TempDir(), ".mcp.json", tt.content)
			_, err := Load(Options{Files: []string{file}, ManagedFile: noManaged(t), LookupEnv: fakeEnv(nil)})
			require.Error(t, err)
			var ce *Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.wantPath, ce.Path)
			assert.Contains(t, ce.Err.Error(), tt.wantErr)
			if tt.wantPath != "mcpServers.a.sandbox.write[0]" {
				assert.ErrorIs(t, err, transports.ErrInvalidSandbox)
			}
		})
	}
}

// A program that builds a mcpvisor.ServerConfig itself must give absolute paths:
// there is no file to be relative to.
func TestServerConfigSandboxNeedsAbsolutePaths(t *testing.T) {
	sc := mcpvisor.ServerConfig{Config: transports.Config{Command: "x",
		Sandbox: &transports.Sandbox{Enabled: true, Write: []string{"out"}}}}
	err := sc.Validate()
	require.ErrorIs(t, err, transports.ErrInvalidSandbox)
	assert.Contains(t, err.Error(), `write[0]: "out" is not an absolute path`)
}
