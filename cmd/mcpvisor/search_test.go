package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// supervise --tools search serves the search tools at /mcp; status shows
// the mode, the estimated tokens of each server's definitions and the
// deferred servers; bad --tools and --always-offer values are usage
// errors.
func TestSuperviseSearchFlags(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	lazy := mock(bin, "-name", "lazy")
	lazy["defer"] = true
	cfg := writeConfig(t, map[string]any{"a": mock(bin, "-name", "a"), "lazy": lazy})

	for _, bad := range [][]string{{"--tools", "some"}, {"--always-offer", "["}} {
		r := cli(t, append([]string{"supervise", "--config", cfg, "--listen", "127.0.0.1:0"}, bad...)...)
		assert.Equal(t, 2, r.code, "%v: stderr: %s", bad, r.stderr)
	}

	cmd := exec.Command(bin, "supervise", "--config", cfg, "--listen", "127.0.0.1:0", "--tools", "search", "--always-offer", "a__echo",
		"--max-result-chars", "500")
	p := startLogged(t, cmd)
	base := gatewayURL(t, p.logs)
	body := mcpPost(t, base, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	require.Contains(t, body, `"serverInfo"`)
	lazyRow := regexp.MustCompile(`(?m)^lazy +connected +\S+ +ready +5 \(deferred\) +~\d+ `)
	var st result
	require.Eventually(t, func() bool {
		st = cli(t, "status", "--url", base)
		return lazyRow.MatchString(st.stdout)
	}, 20*time.Second, 50*time.Millisecond, "the deferred server's row")
	assert.Contains(t, st.stdout, "tools/list: search")
	assert.Regexp(t, `(?m)^a +connected +\S+ +ready +5 +~\d+ `, st.stdout)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	require.NoError(t, p.wait(t))
}
