//go:build linux

package mcpvisor_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox/sandboxtest"
)

// Each Landlock-confined server has a private TMPDIR: another confined
// server can neither read nor write it. The directories are made in the
// user's runtime directory when it is a private tmpfs (here a tmpfs
// mounted for the test stands for /run/user/<uid>), else in the hidden
// home directory's ~/.cache.
func TestSandboxTmpdirsArePrivate(t *testing.T) {
	requireMechanism(t, transports.SandboxLandlock)
	bin := probeBinary(t)
	for _, where := range []string{"runtime-dir", "home-cache"} {
		t.Run(where, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			require.NoError(t, os.MkdirAll(home, 0o755))
			opts := sandboxOptions(home)
			parent := filepath.Join(home, ".cache", "mcpvisor", "sandbox-tmp")
			if where == "runtime-dir" {
				opts.Sandbox.RuntimeDir = runtimeDir(t)
				parent = filepath.Join(opts.Sandbox.RuntimeDir, "mcpvisor-sandbox")
			} else {
				opts.Sandbox.RuntimeDir = filepath.Join(t.TempDir(), "none") // missing: not used
			}
			ctx := context.Background()
			sup, err := mcpvisor.Start(ctx, opts)
			require.NoError(t, err)
			t.Cleanup(func() { sup.Close(context.Background()) })
			servers := map[string]mcpvisor.ServerConfig{}
			for _, name := range []string{"a", "b"} {
				cfg := mcpvisor.ServerConfig{Config: sandboxtest.Command(bin)}
				cfg.Sandbox = &transports.Sandbox{Enabled: true, Mechanism: transports.SandboxLandlock}
				servers[name] = cfg
			}
			_, err = sup.SetServers(ctx, servers, mcpvisor.AwaitSettled(30*time.Second))
			require.NoError(t, err)
			call := func(server, tool string, args map[string]any) (string, bool) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				res, err := sup.CallTool(ctx, mcpvisor.QualifiedName(server, tool), args)
				require.NoError(t, err)
				var text strings.Builder
				for _, c := range res.Content {
					text.WriteString(c.Text)
				}
				return text.String(), res.IsError
			}
			tmpA, failed := call("a", sandboxtest.ToolEnv, map[string]any{"name": "TMPDIR"})
			require.False(t, failed)
			tmpB, _ := call("b", sandboxtest.ToolEnv, map[string]any{"name": "TMPDIR"})
			assert.Equal(t, parent, filepath.Dir(tmpA), "a's TMPDIR is in %s", parent)
			assert.Equal(t, parent, filepath.Dir(tmpB))
			require.NotEqual(t, tmpA, tmpB)

			text, failed := call("a", sandboxtest.ToolWrite, map[string]any{"path": filepath.Join(tmpA, "mine")})
			require.False(t, failed, "a writes its own TMPDIR: %s", text)
			text, failed = call("b", sandboxtest.ToolRead, map[string]any{"path": filepath.Join(tmpA, "mine")})
			assert.True(t, failed, "b must not read a's TMPDIR, got %q", text)
			text, failed = call("b", sandboxtest.ToolWrite, map[string]any{"path": filepath.Join(tmpA, "theirs")})
			assert.True(t, failed, "b must not write a's TMPDIR: %s", text)
			assert.NoFileExists(t, filepath.Join(tmpA, "theirs"))
			text, failed = call("b", sandboxtest.ToolWrite, map[string]any{"path": filepath.Join(parent, "beside")})
			assert.True(t, failed, "nor the directory that holds them: %s", text)
		})
	}
}

// runtimeDir mounts a tmpfs of mode 0700, as systemd-logind makes
// /run/user/<uid>, and returns it (root only: others skip).
func runtimeDir(t *testing.T) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "run")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700,size=16m"))
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}
