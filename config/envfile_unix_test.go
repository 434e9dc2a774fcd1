//go:build unix

package config

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An envFile that is not a regular file (a FIFO no one writes, as
// /dev/stdin can be) is never waited on: a held entry's is not read, and
// an approved or trusted entry's is refused with a clear error.
func TestAnEnvFileThatIsNotARegularFileNeverBlocks(t *testing.T) {
	lp := newLaunchProject(t)
	fifo := filepath.Join(lp.dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	writeFile(t, lp.dir, ".mcp.json", `{"mcpServers": {"s": {"command": "srv", "envFile": ".env"}}}`)
	require.NoError(t, os.Symlink(fifo, filepath.Join(lp.dir, ".env")))

	type result struct {
		cfg *Config
		err error
	}
	within := func(load func() (*Config, error)) result {
		t.Helper()
		done := make(chan result, 1)
		go func() {
			cfg, err := load()
			done <- result{cfg, err}
		}()
		select {
		case r := <-done:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("loading the config blocks on the envFile")
			return result{}
		}
	}

	r := within(func() (*Config, error) {
		return Load(Options{Home: lp.home, Dir: lp.dir, ManagedFile: noManaged(t), LookupEnv: fakeEnv(nil), Approvals: lp.store})
	})
	require.NoError(t, r.err)
	require.Contains(t, r.cfg.Pending, "s")
	assert.Equal(t, filepath.Join(lp.dir, ".env"), r.cfg.Pending["s"].EnvFile)
	assert.Empty(t, r.cfg.Pending["s"].EnvFileVariables)

	r = within(func() (*Config, error) {
		return Load(Options{Files: []string{filepath.Join(lp.dir, ".mcp.json")}, ManagedFile: noManaged(t)})
	})
	require.Error(t, r.err)
	assert.True(t, errors.Is(r.err, ErrEnvFile))
	assert.True(t, errors.Is(r.err, ErrEnvFileNotRegular))
	assert.Contains(t, r.err.Error(), "not a regular file")

	held := within(func() (*Config, error) {
		return Load(Options{Home: lp.home, Dir: lp.dir, ManagedFile: noManaged(t), LookupEnv: fakeEnv(nil), Approvals: lp.store})
	})
	require.NoError(t, held.err)
	errc := make(chan error, 1)
	go func() {
		_, err := held.cfg.Approval("s")
		errc <- err
	}()
	select {
	case err := <-errc:
		require.Error(t, err, "approving it fails the same way")
		assert.Contains(t, err.Error(), "not a regular file")
	case <-time.After(10 * time.Second):
		t.Fatal("approving blocks on the envFile")
	}
}
