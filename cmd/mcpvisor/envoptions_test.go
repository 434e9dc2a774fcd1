package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/mcpvisor/mcpvisor"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// The command maps Claude Code's environment variables onto the options
// it left zero; a value that is not a positive integer is ignored.
func TestApplyEnvOptions(t *testing.T) {
	env := envOf(map[string]string{
		"MCP_SERVER_CONNECTION_BATCH_SIZE":        "7",
		"MCP_REMOTE_SERVER_CONNECTION_BATCH_SIZE": "40",
		"MCP_TIMEOUT":      "1500",
		"MCP_TOOL_TIMEOUT": "90000",
	})
	var o mcpvisor.Options
	applyEnvOptions(&o, env)
	assert.Equal(t, 7, o.LocalConnectLimit)
	assert.Equal(t, 40, o.RemoteConnectLimit)
	assert.Equal(t, 1500*time.Millisecond, o.ConnectTimeout)
	assert.Equal(t, 90*time.Second, o.CallTimeout)

	set := mcpvisor.Options{LocalConnectLimit: 2, CallTimeout: time.Second}
	applyEnvOptions(&set, env)
	assert.Equal(t, 2, set.LocalConnectLimit, "an option the command set wins over the environment")
	assert.Equal(t, time.Second, set.CallTimeout)

	var bad mcpvisor.Options
	applyEnvOptions(&bad, envOf(map[string]string{"MCP_SERVER_CONNECTION_BATCH_SIZE": "-1", "MCP_TIMEOUT": "soon"}))
	assert.Zero(t, bad, "values that are not positive integers are ignored")
}

// The command opens a browser only where there is a graphical session to
// open it in; elsewhere it prints the URL.
func TestHasBrowser(t *testing.T) {
	none := envOf(nil)
	assert.False(t, hasBrowser("linux", none), "no DISPLAY, no WAYLAND_DISPLAY: print")
	assert.True(t, hasBrowser("linux", envOf(map[string]string{"DISPLAY": ":0"})))
	assert.True(t, hasBrowser("freebsd", envOf(map[string]string{"WAYLAND_DISPLAY": "wayland-0"})))
	assert.True(t, hasBrowser("darwin", none), "macOS and Windows always have one")
	assert.True(t, hasBrowser("windows", none))
}
