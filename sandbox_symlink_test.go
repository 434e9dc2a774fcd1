package mcpvisor_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox/sandboxtest"
)

// A confined server whose working directory, read path and write path
// are symbolic links (inside the hidden home directory, and from outside
// into it) starts, reads and writes through them; the rest of the home
// directory stays hidden. bubblewrap failed to start it ("Can't mkdir"):
// the paths are resolved, each rule covers where its link leads, and the
// links are made again inside the sandbox.
func TestSandboxSymlinkedPaths(t *testing.T) {
	bin := probeBinary(t)
	for _, m := range []transports.SandboxMechanism{transports.SandboxLandlock, transports.SandboxBwrap} {
		t.Run(string(m), func(t *testing.T) {
			requireMechanism(t, m)
			base := t.TempDir()
			home := filepath.Join(base, "home")
			real := filepath.Join(home, "projects", "real")
			require.NoError(t, os.MkdirAll(real, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(real, "data"), []byte("d4ta"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(home, "secret"), []byte("s3cret"), 0o600))
			// home/work → projects/real (relative, inside the home
			// directory); base/outer → home/projects/real (absolute, from
			// outside into it); home/out → home/projects/real/out.
			require.NoError(t, os.Symlink(filepath.Join("projects", "real"), filepath.Join(home, "work")))
			require.NoError(t, os.Symlink(real, filepath.Join(base, "outer")))
			require.NoError(t, os.MkdirAll(filepath.Join(real, "out"), 0o755))
			require.NoError(t, os.Symlink(filepath.Join(real, "out"), filepath.Join(home, "out")))

			cfg := mcpvisor.ServerConfig{Config: sandboxtest.Command(bin)}
			cfg.Cwd = filepath.Join(home, "work")
			cfg.Sandbox = &transports.Sandbox{Enabled: true, Mechanism: m,
				Read: []string{filepath.Join(base, "outer")}, Write: []string{filepath.Join(home, "out")}}
			ctx := context.Background()
			sup, err := mcpvisor.Start(ctx, sandboxOptions(home))
			require.NoError(t, err)
			t.Cleanup(func() { sup.Close(context.Background()) })
			_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{"probe": cfg}, mcpvisor.AwaitSettled(30*time.Second))
			require.NoError(t, err)
			st := statusOf(sup, "probe")
			require.Equal(t, mcpvisor.StateReady, st.State, "the probe must start in its symlinked working directory: %s", st.LastError)
			assert.Equal(t, m, st.Sandbox)

			for _, p := range []string{filepath.Join(home, "work", "data"), filepath.Join(base, "outer", "data"), filepath.Join(real, "data")} {
				text, failed, err := probeCall(t, sup, sandboxtest.ToolRead, map[string]any{"path": p})
				require.NoError(t, err)
				assert.False(t, failed, "reading %s: %s", p, text)
				assert.Equal(t, "d4ta", text, p)
			}
			text, failed, err := probeCall(t, sup, sandboxtest.ToolWrite, map[string]any{"path": filepath.Join(home, "out", "written")})
			require.NoError(t, err)
			assert.False(t, failed, "writing through the symlinked write path: %s", text)
			assert.FileExists(t, filepath.Join(real, "out", "written"))

			text, failed, err = probeCall(t, sup, sandboxtest.ToolRead, map[string]any{"path": filepath.Join(home, "secret")})
			require.NoError(t, err)
			assert.True(t, failed, "the rest of the home directory stays hidden")
			assert.NotContains(t, text, "s3cret")
			text, failed, err = probeCall(t, sup, sandboxtest.ToolWrite, map[string]any{"path": filepath.Join(real, "written")})
			require.NoError(t, err)
			assert.True(t, failed, "the read path is not writable: %s", text)
		})
	}
}
