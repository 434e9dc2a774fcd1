package mcpvisor_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/config"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox/sandboxtest"
)

// approveEvery approves every entry of an untrusted layer.
type approveEvery struct{}

func (approveEvery) Approved(string, string, string) (approved, changed bool, err error) {
	return true, false, nil
}

// loadProbeProject loads a project whose .mcp.json runs the probe server
// with args and no "sandbox", under a managed file holding policy ("" for
// none), every entry approved.
func loadProbeProject(t *testing.T, bin, policy string, args ...string) *config.Config {
	t.Helper()
	project := t.TempDir()
	entry, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"probe": map[string]any{"command": bin, "args": args}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(project, ".mcp.json"), entry, 0o600))
	managed := filepath.Join(t.TempDir(), "managed-mcp.json")
	if policy != "" {
		require.NoError(t, os.WriteFile(managed, []byte(policy), 0o600))
	}
	cfg, err := config.Load(config.Options{Home: t.TempDir(), Dir: project, ManagedFile: managed, Approvals: approveEvery{}})
	require.NoError(t, err)
	require.Contains(t, cfg.Servers, "probe", "excluded: %v", cfg.Excluded)
	return cfg
}

// startProbe runs the servers of cfg in a new supervisor until settled
// and returns the probe's status.
func startProbe(t *testing.T, cfg *config.Config, opts mcpvisor.Options) (*mcpvisor.Supervisor, mcpvisor.ServerStatus) {
	t.Helper()
	ctx := context.Background()
	sup, err := mcpvisor.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { sup.Close(context.Background()) })
	_, err = sup.SetServers(ctx, cfg.Servers, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	return sup, statusOf(sup, "probe")
}

// A managed requireSandbox "project" confines a project server that asks
// for nothing: it runs under the default sandbox (its status names the
// mechanism) and cannot write outside it; without the policy the same
// entry runs unconfined and can.
func TestRequireSandboxConfinesAProjectServer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox mechanisms tested here are Linux's")
	}
	bin := probeBinary(t)
	for _, tt := range []struct {
		name, policy string
		confined     bool
	}{
		{"required", `{"requireSandbox": "project"}`, true},
		{"control", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := loadProbeProject(t, bin, tt.policy)
			sup, st := startProbe(t, cfg, sandboxOptions(t.TempDir()))
			require.Equal(t, mcpvisor.StateReady, st.State, "%s", st.LastError)
			outside := filepath.Join(t.TempDir(), "outside")
			text, failed, err := probeCall(t, sup, sandboxtest.ToolWrite, map[string]any{"path": outside})
			require.NoError(t, err)
			_, statErr := os.Stat(outside)
			if !tt.confined {
				assert.Empty(t, st.Sandbox)
				assert.False(t, failed, text)
				assert.NoError(t, statErr, "unconfined, the write succeeds")
				return
			}
			assert.Contains(t, []transports.SandboxMechanism{transports.SandboxBwrap, transports.SandboxLandlock}, st.Sandbox,
				"the status names the mechanism in effect")
			assert.True(t, failed, "confined, the write is denied: %s", text)
			assert.True(t, errors.Is(statErr, os.ErrNotExist), "confined, no file is written")
		})
	}
}

// With the policy and no mechanism available, the project server is
// failed with the reason and its command never ran: the policy never
// lets it run unconfined.
func TestRequireSandboxWithoutAMechanismNeverRuns(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux")
	}
	bin := probeBinary(t)
	marker := filepath.Join(t.TempDir(), "ran")
	cfg := loadProbeProject(t, bin, `{"requireSandbox": "project"}`, "-marker", marker)
	t.Setenv("PATH", t.TempDir()) // no bwrap
	opts := sandboxOptions(t.TempDir())
	opts.Sandbox.Disable = []transports.SandboxMechanism{transports.SandboxLandlock}
	_, st := startProbe(t, cfg, opts)
	assert.Equal(t, mcpvisor.StateFailed, st.State)
	assert.Equal(t, mcpvisor.FailureSandbox, st.LastFailure)
	assert.Contains(t, st.LastError, "landlock: disabled by the host")
	_, statErr := os.Stat(marker)
	assert.True(t, errors.Is(statErr, os.ErrNotExist), "the command must never have run unconfined")
}
