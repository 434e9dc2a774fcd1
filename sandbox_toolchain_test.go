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

// toolchainLayout builds, in home, a version manager's tree whose
// launcher starts the probe server bin, and returns the command a config
// names (as PATH would find it).
type toolchainLayout func(t *testing.T, home, bin string) string

// toolchainLayouts mimic how the version managers most developers use
// start an interpreter from under the home directory.
var toolchainLayouts = map[string]toolchainLayout{
	// pyenv: shims/<name> is a script that runs libexec/pyenv exec
	// <name>, which reads the version file and runs
	// versions/<v>/bin/<name>.
	"pyenv": func(t *testing.T, home, bin string) string {
		root := filepath.Join(home, ".pyenv")
		writeTreeFile(t, filepath.Join(root, "version"), "3.12.1\n", 0o644)
		copyFile(t, bin, filepath.Join(root, "versions", "3.12.1", "bin", "probe-server"))
		writeTreeFile(t, filepath.Join(root, "libexec", "pyenv"), "#!/bin/sh\nshift\nname=$1; shift\nversion=$(cat \"$PYENV_ROOT/version\")\nexec \"$PYENV_ROOT/versions/$version/bin/$name\" \"$@\"\n", 0o755)
		shim := filepath.Join(root, "shims", "probe-server")
		writeTreeFile(t, shim, "#!/bin/sh\nset -e\nexport PYENV_ROOT=\""+root+"\"\nexec \""+root+"/libexec/pyenv\" exec probe-server \"$@\"\n", 0o755)
		return shim
	},
	// asdf: the shim runs bin/asdf exec, which reads ~/.tool-versions
	// (a file in the home directory itself) and runs
	// installs/<tool>/<v>/bin/<name>.
	"asdf": func(t *testing.T, home, bin string) string {
		root := filepath.Join(home, ".asdf")
		writeTreeFile(t, filepath.Join(home, ".tool-versions"), "probe 1.0.4\n", 0o644)
		copyFile(t, bin, filepath.Join(root, "installs", "probe", "1.0.4", "bin", "probe-server"))
		writeTreeFile(t, filepath.Join(root, "bin", "asdf"), "#!/bin/sh\nshift\nname=$1; shift\nversion=$(sed -n 's/^probe //p' \""+home+"/.tool-versions\")\nexec \""+root+"/installs/probe/$version/bin/$name\" \"$@\"\n", 0o755)
		shim := filepath.Join(root, "shims", "probe-server")
		writeTreeFile(t, shim, "#!/bin/sh\nexec \""+root+"/bin/asdf\" exec probe-server \"$@\"\n", 0o755)
		return shim
	},
	// nvm: versions/node/<v>/bin/<name> is a symbolic link into the
	// installation's lib/node_modules.
	"nvm": func(t *testing.T, home, bin string) string {
		inst := filepath.Join(home, ".nvm", "versions", "node", "v20.11.1")
		target := filepath.Join(inst, "lib", "node_modules", "probe", "bin", "probe-server")
		copyFile(t, bin, target)
		link := filepath.Join(inst, "bin", "probe-server")
		require.NoError(t, os.MkdirAll(filepath.Dir(link), 0o755))
		require.NoError(t, os.Symlink(filepath.Join("..", "lib", "node_modules", "probe", "bin", "probe-server"), link))
		return link
	},
	// ~/.local/bin/<name> links into a tool's own environment (uv tool
	// install, pipx).
	"local-bin": func(t *testing.T, home, bin string) string {
		target := filepath.Join(home, ".local", "share", "uv", "tools", "probe", "bin", "probe-server")
		copyFile(t, bin, target)
		link := filepath.Join(home, ".local", "bin", "probe-server")
		require.NoError(t, os.MkdirAll(filepath.Dir(link), 0o755))
		require.NoError(t, os.Symlink(target, link))
		return link
	},
}

// A confined server whose command is a version manager's shim or
// launcher under the home directory starts (pyenv's shim exited 127: its
// libexec and versions were hidden) and works, while the rest of the
// home directory stays hidden.
func TestSandboxToolchainsUnderTheHome(t *testing.T) {
	bin := probeBinary(t)
	for _, m := range []transports.SandboxMechanism{transports.SandboxLandlock, transports.SandboxBwrap} {
		for name, layout := range toolchainLayouts {
			t.Run(string(m)+"/"+name, func(t *testing.T) {
				requireMechanism(t, m)
				home := filepath.Join(t.TempDir(), "home")
				writeTreeFile(t, filepath.Join(home, "secret"), "s3cret", 0o600)
				writeTreeFile(t, filepath.Join(home, ".ssh", "id_ed25519"), "k3y", 0o600)
				command := layout(t, home, bin)

				cfg := mcpvisor.ServerConfig{Config: sandboxtest.Command(command)}
				cfg.Config.Command = command
				cfg.Sandbox = &transports.Sandbox{Enabled: true, Mechanism: m}
				ctx := context.Background()
				sup, err := mcpvisor.Start(ctx, sandboxOptions(home))
				require.NoError(t, err)
				t.Cleanup(func() { sup.Close(context.Background()) })
				_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{"probe": cfg}, mcpvisor.AwaitSettled(30*time.Second))
				require.NoError(t, err)
				st := statusOf(sup, "probe")
				require.Equal(t, mcpvisor.StateReady, st.State, "the server started through %s's launcher: %s", name, st.LastError)
				assert.Equal(t, m, st.Sandbox)

				for _, p := range []string{filepath.Join(home, "secret"), filepath.Join(home, ".ssh", "id_ed25519")} {
					text, failed, err := probeCall(t, sup, sandboxtest.ToolRead, map[string]any{"path": p})
					require.NoError(t, err)
					assert.True(t, failed, "%s stays hidden: %s", p, text)
				}
				text, failed, err := probeCall(t, sup, sandboxtest.ToolWrite, map[string]any{"path": filepath.Join(filepath.Dir(command), "planted")})
				require.NoError(t, err)
				assert.True(t, failed, "the toolchain is readable, not writable: %s", text)
			})
		}
	}
}

func writeTreeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), mode))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	writeTreeFile(t, to, string(b), 0o755)
}
