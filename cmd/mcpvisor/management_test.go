package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
)

// supervise --management-tools offers the management tools through the
// gateway: a client connects a lazy server of the config with connect_mcp
// and gets its tools; without the flag the tools are not offered.
func TestSuperviseManagementTools(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.json")
	data, err := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"lazy": map[string]any{"command": binPath, "args": []string{"mock"}, "lazy": true},
	}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfg, data, 0o600))

	for _, flagged := range []bool{true, false} {
		args := []string{"--config", cfg}
		if flagged {
			args = append(args, "--management-tools")
		}
		// Its own state dir: connecting the lazy server caches its tools
		// there (the discovery cache), which other tests must not see.
		r := startSupervise(t, dir, []string{envStateDir + "=" + t.TempDir()}, args...)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		host, err := mcpvisor.Start(ctx, mcpvisor.Options{})
		require.NoError(t, err)
		_, err = host.SetServers(ctx, map[string]mcpvisor.ServerConfig{
			"gw": {Config: transports.Config{Type: transports.TypeHTTP, URL: r.base + "/mcp"}},
		}, mcpvisor.AwaitSettled(20*time.Second))
		require.NoError(t, err)
		res, err := host.CallTool(ctx, "mcp__gw__connect_mcp", map[string]string{"server": "lazy"})
		if !flagged {
			assert.ErrorIs(t, err, mcpvisor.ErrUnknownTool, "no management tools without the flag")
		} else {
			require.NoError(t, err)
			require.False(t, res.IsError, res.Content[0].Text)
			var out struct {
				Connected bool     `json:"connected"`
				Tools     []string `json:"tools"`
			}
			require.NoError(t, json.Unmarshal(res.StructuredContent, &out))
			assert.True(t, out.Connected)
			assert.Contains(t, out.Tools, "mcp__lazy__echo")
		}
		require.NoError(t, host.Close(ctx))
		cancel()
		r.stop(t)
	}
}
