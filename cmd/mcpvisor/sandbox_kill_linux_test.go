package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

// A Landlock-confined server's private temporary directory (on the host,
// unlike bubblewrap's /tmp) is removed with what the server left in it
// when the supervisor is killed with SIGKILL: the process helper, which
// outlives the supervisor long enough to end its servers, removes it.
func TestSIGKILLedSupervisorRemovesConfinedTmpdirs(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	probe := probeBinary(t)
	out := filepath.Join(dir, "out")
	require.NoError(t, os.MkdirAll(out, 0o755))
	report := filepath.Join(out, "tmpdir")
	servers := map[string]any{"confined": map[string]any{
		"command": probe, "args": []string{"-tmpdir", report},
		"sandbox": map[string]any{"mechanism": "landlock", "write": []string{out}},
	}}
	tag := testTag(t)
	cmd, _, _ := startSuperviseAllReady(t, bin, writeConfig(t, servers), keys(servers), tag)

	data, err := os.ReadFile(report)
	require.NoError(t, err, "the probe reports its TMPDIR")
	tmp := string(data)
	require.True(t, filepath.IsAbs(tmp), "TMPDIR %q", tmp)
	require.FileExists(t, filepath.Join(tmp, "left-behind"), "the probe left a file in its TMPDIR")

	tree := stdiotest.Descendants(cmd.Process.Pid)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	assertNothingLeft(t, tree, tag)
	left := stdiotest.Eventually(5*time.Second, func() []string {
		if _, err := os.Lstat(tmp); err == nil {
			return []string{tmp}
		}
		return nil
	})
	assert.Empty(t, left, "the confined server's TMPDIR outlived the SIGKILLed supervisor")
	if len(left) > 0 {
		os.RemoveAll(tmp)
	}
}
