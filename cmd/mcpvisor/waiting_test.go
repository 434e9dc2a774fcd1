package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inTerminal runs the binary with a pseudo-terminal as its stdin, stdout
// and stderr (util-linux script) and returns what the terminal showed.
func inTerminal(t *testing.T, args ...string) string {
	t.Helper()
	script, err := exec.LookPath("script")
	require.NoError(t, err, "script (util-linux) gives the command a terminal")
	line := binPath
	for _, a := range args {
		line += " '" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "-qfec", line, "/dev/null")
	cmd.Env = cliEnv()
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "mcpvisor %v did not finish in time:\n%s", args, out)
	require.NoError(t, err, "mcpvisor %v:\n%s", args, out)
	return string(out)
}

// On a terminal, list and call say every 2 s which servers they still
// wait for; piped, they do not.
func TestListAndCallSayWhatTheyWaitFor(t *testing.T) {
	t.Parallel() // four runs that wait for a server's 3 s start-up
	cfg := writeConfig(t, map[string]any{
		"slow":  mock(binPath, "-init-delay", "3s"),
		"quick": mock(binPath),
	})
	const line = "waiting for: slow (connecting)"

	out := inTerminal(t, "list", "--config", cfg)
	assert.Contains(t, out, line)
	// quick may still be connecting at the first line on a loaded
	// machine; once it is ready, no later line names it.
	waits := waitingLines(out)
	require.NotEmpty(t, waits)
	assert.NotContains(t, waits[len(waits)-1], "quick (", "a ready server is not waited for")
	assert.Contains(t, out, "mcp__slow__echo", "the list itself")

	out = inTerminal(t, "call", "--config", cfg, "mcp__slow__echo", `{"text":"hi"}`)
	assert.Contains(t, out, line)
	assert.Contains(t, out, `"hi"`)

	r := cli(t, "list", "--config", cfg)
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.rawStderr, "waiting for")
	r = cli(t, "call", "--config", cfg, "mcp__slow__echo", `{"text":"hi"}`)
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.rawStderr, "waiting for")
}

// waitingLines returns the "waiting for:" lines of a terminal's output,
// in order.
func waitingLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		if strings.HasPrefix(l, "waiting for:") {
			lines = append(lines, l)
		}
	}
	return lines
}
