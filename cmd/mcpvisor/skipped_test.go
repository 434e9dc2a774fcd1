package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// supervise run in a project whose .mcp.json does not load serves the
// user's servers and names the skipped file in GET /status and in
// `mcpvisor status`; once the file is fixed, a reload (SIGHUP) clears it.
func TestSuperviseStatusShowsSkippedLayers(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/etc/mcpvisor/managed-mcp.json"); err == nil {
		t.Skip("a managed config file exists on this machine and would win")
	}
	home, project := t.TempDir(), t.TempDir()
	data, err := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"user": mock(binPath),
		// Connected, but its tools/list keeps failing.
		"refusing": mock(binPath, "-fail-lists", "1000000", "-versions", "2025-11-25"),
	}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(home, ".mcp.json"), data, 0o644))
	broken := filepath.Join(project, ".mcp.json")
	require.NoError(t, os.WriteFile(broken, []byte(`{"mcpServers": {"p": `), 0o644))

	cmd := exec.Command(binPath, "supervise", "--listen", "127.0.0.1:0")
	cmd.Dir, cmd.Env = project, cliEnv("HOME="+home)
	p := startLogged(t, cmd)
	base := gatewayURL(t, p.logs)

	type report struct {
		Servers []struct {
			Name, Status string
			ListErrors   []struct{ List, Error string }
		}
		Skipped []struct {
			Layer, File string
			Errors      []string
		}
	}
	status := func() report {
		t.Helper()
		r := cli(t, "status", "--url", base, "--json")
		require.Equal(t, 0, r.code, r.stderr)
		var rep report
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
		return rep
	}
	var rep report
	for deadline := time.Now().Add(testwait.Patience); ; time.Sleep(50 * time.Millisecond) {
		rep = status()
		if len(rep.Servers) == 2 && rep.Servers[0].Status == "connected" && rep.Servers[1].Status == "connected" {
			break
		}
		require.False(t, time.Now().After(deadline), "both servers to connect; status %+v", rep)
	}
	require.Len(t, rep.Servers, 2)
	assert.Equal(t, "refusing", rep.Servers[0].Name)
	assert.Equal(t, "user", rep.Servers[1].Name)
	require.Len(t, rep.Servers[0].ListErrors, 1, "a refused tools/list is in the status")
	assert.Equal(t, "tools", rep.Servers[0].ListErrors[0].List)
	assert.Contains(t, rep.Servers[0].ListErrors[0].Error, "tools/list fails")
	require.Len(t, rep.Skipped, 1, "the broken project file is in the status")
	assert.Equal(t, "project", rep.Skipped[0].Layer)
	assert.True(t, samePath(broken, rep.Skipped[0].File), "skipped file %q, want %q", rep.Skipped[0].File, broken)
	require.Len(t, rep.Skipped[0].Errors, 1)
	assert.Contains(t, rep.Skipped[0].Errors[0], "invalid JSON")

	r := cli(t, "status", "--url", base)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^Skipped config file .*\.mcp\.json \(project layer\): it does not load$`, r.stdout)
	assert.Regexp(t, `(?m)^  .*invalid JSON`, r.stdout)
	assert.Regexp(t, `(?m)^refusing +connected +user +ready +0 .*\[list tools\] .*tools/list fails`, r.stdout)

	// Fixed and reloaded: nothing is skipped any more.
	require.NoError(t, os.WriteFile(broken, []byte(`{"mcpServers": {}}`), 0o644))
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	p.logs.waitFor(t, testwait.Patience, "the reload", func(lines []map[string]any) bool {
		for _, m := range lines {
			if m["message"] == "config reloaded (SIGHUP)" {
				return true
			}
		}
		return false
	})
	assert.Empty(t, status().Skipped)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t), "log:\n%s", p.logs)
}
