package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/audit"
)

// supervise --audit FILE writes the trail of the calls and refusals it
// served, rotated by --audit-max-size; `mcpvisor audit verify` passes on
// it (the rotated files oldest first) and points at the line an edit, a
// removal, a swap or a cut breaks, exiting 1.
func TestSuperviseAuditTrail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, map[string]any{"a": mock(binPath, "-name", "a")})
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("tok-s3cret-1234\n"), 0o600))
	path := filepath.Join(dir, "audit.log")
	cmd := exec.Command(binPath, "supervise", "--config", cfg, "--listen", "127.0.0.1:0", "--token-file", tokenFile,
		"--audit", path, "--audit-max-size", "1500", "--audit-keep", "20", "--audit-arguments")
	p := startLogged(t, cmd)
	base := gatewayURL(t, p.logs)
	require.Eventually(t, func() bool {
		return strings.Contains(cli(t, "status", "--url", base, "--token-file", tokenFile).stdout, "ready")
	}, 20*time.Second, 50*time.Millisecond)
	auth := []string{"Authorization", "Bearer tok-s3cret-1234"}
	for i := range 8 {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"mcp__a__echo","arguments":{"text":"call %d","password":"hunter2-pw-%d"}}}`, i+1, i, i)
		got := mcpPostNoFail(base, body, append([]string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "mcp__a__echo"}, auth...)...)
		require.Contains(t, got, fmt.Sprintf("call %d", i))
	}
	refused := mcpPostNoFail(base, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "Authorization", "Bearer wrong")
	assert.Contains(t, refused, "unauthorized")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t), "log:\n%s", p.logs)

	// The trail: rotated files, oldest first.
	files := []string{}
	for i := 20; i >= 1; i-- {
		if _, err := os.Stat(fmt.Sprintf("%s.%d", path, i)); err == nil {
			files = append(files, fmt.Sprintf("%s.%d", path, i))
		}
	}
	require.NotEmpty(t, files, "--audit-max-size 1500 rotated the trail")
	files = append(files, path)
	r := cli(t, append([]string{"audit", "verify"}, files...)...)
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.Regexp(t, `^OK 9 lines in \d+ file\(s\), seq 1..9, from genesis`, r.stdout)

	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		all = append(all, b...)
	}
	assert.NotContains(t, string(all), "hunter2-pw", "arguments are redacted")
	assert.NotContains(t, string(all), "tok-s3cret-1234")
	assert.Contains(t, string(all), `"text":"call 3"`)
	assert.Contains(t, string(all), `"password":"[redacted]"`)
	assert.Contains(t, string(all), `"action":"refused"`)
	assert.Equal(t, 8, strings.Count(string(all), `"action":"tools/call"`))

	// Tampered copies of the whole trail in one file.
	lines := strings.SplitAfter(strings.TrimSuffix(string(all), "\n"), "\n")
	require.Len(t, lines, 9)
	tampered := map[string]struct {
		lines []string
		want  string
	}{
		"edited":    {replaceAt(lines, 3, strings.Replace(lines[3], "call 3", "call X", 1)), `line 5 \(seq 5\): .*prev does not match`},
		"removed":   {append(append([]string{}, lines[:4]...), lines[5:]...), `line 5 \(seq 6\): .*lines are missing`},
		"reordered": {swap(lines, 5, 6), `line 6 \(seq 7\): .*lines are missing or out of order`},
		"truncated": {replaceAt(lines, 8, lines[8][:20]), "line 9: .*partial line"},
	}
	for name, tc := range tampered {
		f := filepath.Join(dir, name+".log")
		require.NoError(t, os.WriteFile(f, []byte(strings.Join(tc.lines, "")), 0o600))
		r := cli(t, "audit", "verify", f)
		assert.Equal(t, 1, r.code, "%s: %s", name, r.stdout)
		assert.Regexp(t, "^BROKEN "+regexp.QuoteMeta(f)+" "+tc.want, r.stdout, name)
	}
	whole := filepath.Join(dir, "whole.log")
	require.NoError(t, os.WriteFile(whole, all, 0o600))
	assert.Equal(t, 0, cli(t, "audit", "verify", whole).code, "the untouched copy verifies")
}

func replaceAt(lines []string, i int, s string) []string {
	out := append([]string{}, lines...)
	out[i] = s
	return out
}

func swap(lines []string, i, j int) []string {
	out := append([]string{}, lines...)
	out[i], out[j] = out[j], out[i]
	return out
}

// --audit - writes the trail to stdout; the lines are a valid trail.
func TestSuperviseAuditStdout(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, map[string]any{"a": mock(binPath, "-name", "a")})
	cmd := exec.Command(binPath, "supervise", "--config", cfg, "--listen", "127.0.0.1:0", "--audit", "-")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	p := startLogged(t, cmd)
	base := gatewayURL(t, p.logs)
	require.Eventually(t, func() bool {
		return strings.Contains(cli(t, "status", "--url", base).stdout, "ready")
	}, 20*time.Second, 50*time.Millisecond)
	require.Contains(t, statelessToolCall(base, 7, "mcp__a__echo", `{"text":"out"}`), "out")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t), "log:\n%s", p.logs)
	out := strings.TrimSpace(stdout.String())
	require.NotEmpty(t, out)
	l, err := audit.DecodeLine([]byte(out))
	require.NoError(t, err, out)
	assert.Equal(t, "tools/call", l.Action)
	assert.Equal(t, "a", l.Server)
	assert.Equal(t, "7", string(l.RequestID))
	f := filepath.Join(t.TempDir(), "out.log")
	require.NoError(t, os.WriteFile(f, stdout.Bytes(), 0o600))
	assert.Equal(t, 0, cli(t, "audit", "verify", f).code)
}

func TestSuperviseAuditUsage(t *testing.T) {
	t.Parallel()
	r := cli(t, "supervise", "--stdio", "--audit", "-")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--stdio")
	r = cli(t, "supervise", "--audit-arguments")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "need --audit")
	r = cli(t, "audit", "verify")
	assert.Equal(t, 2, r.code)
	r = cli(t, "audit", "verify", filepath.Join(t.TempDir(), "missing.log"))
	assert.Equal(t, 1, r.code)
}
