package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonLines requires every line of stderr to be one JSON object and
// returns them.
func jsonLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "a stderr line that is not JSON: %q\nstderr:\n%s", line, stderr)
		out = append(out, m)
	}
	return out
}

// With stderr piped (--log-format auto) every stderr line is JSON: the
// logs, and the error that ends the command (level error, with the exit
// code and the usage hint); --log-format text gives plain lines only.
func TestLogFormatOneFormatPerStream(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.json")

	// Logs, then a failure already logged.
	r := cli(t, "call", "--config", missing, "s.t")
	require.Equal(t, exitFailure, r.code, r.stderr)
	lines := jsonLines(t, r.rawStderr)
	require.NotEmpty(t, lines)

	// A usage error of the command's own.
	r = cli(t, "call", "--config", missing, "s.t", "{not json")
	require.Equal(t, exitUsage, r.code, r.stderr)
	lines = jsonLines(t, r.rawStderr)
	last := lines[len(lines)-1]
	assert.Equal(t, "error", last["level"])
	assert.Contains(t, last["message"], "ARGS_JSON")
	assert.EqualValues(t, exitUsage, last["exit_code"])
	assert.Equal(t, "Run 'mcpvisor call --help' for usage.", last["hint"])

	// cobra's: an unknown flag.
	r = cli(t, "trust", "--no-such-flag")
	require.Equal(t, exitUsage, r.code, r.stderr)
	lines = jsonLines(t, r.rawStderr)
	assert.Contains(t, lines[len(lines)-1]["message"], "no-such-flag")

	// --log-format json on the same, explicitly.
	r = cli(t, "--log-format", "json", "call", "--config", missing, "s.t", "{not json")
	require.Equal(t, exitUsage, r.code, r.stderr)
	jsonLines(t, r.rawStderr)

	// Text: plain sentences, no JSON.
	r = cli(t, "--log-format", "text", "call", "--config", missing, "s.t")
	require.Equal(t, exitFailure, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "{")
	assert.Contains(t, r.stderr, "config error")
	r = cli(t, "--log-format", "text", "call", "--config", missing, "s.t", "{not json")
	require.Equal(t, exitUsage, r.code, r.stderr)
	assert.NotContains(t, r.stderr, `"level"`)
	assert.Contains(t, r.stderr, "mcpvisor: ARGS_JSON")
	assert.Contains(t, r.stderr, "\nRun 'mcpvisor call --help' for usage.\n")

	// A format that does not exist is a usage error, reported as JSON
	// (auto's choice for a pipe).
	r = cli(t, "--log-format", "yaml", "status")
	require.Equal(t, exitUsage, r.code, r.stderr)
	lines = jsonLines(t, r.rawStderr)
	assert.Contains(t, lines[len(lines)-1]["message"], `--log-format "yaml": want auto, text or json`)
}

// The file token store chosen because no OS secret store works is one
// plain info line at supervise start; why (an error chain naming D-Bus)
// is logged only at debug level.
func TestTokenStoreFallbackIsOnePlainLine(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "tokens.json")
	cfg := writeConfig(t, map[string]any{})
	env := []string{
		envTokenStore + "=" + store,
		envTokenStoreBackend + "=auto",                                      // auto: try the OS store first
		"DBUS_SESSION_BUS_ADDRESS=unix:path=" + filepath.Join(dir, "nobus"), // a session bus that is not there
	}
	want := "OAuth tokens are kept in " + store + ": no OS secret store works here"

	for _, level := range []string{"info", "debug"} {
		t.Run(level, func(t *testing.T) {
			s := startSupervise(t, dir, env, "--config", cfg, "--log-level", level)
			s.waitLog(t, want, 1)
			s.stop(t)
			sawReason := false
			s.logs.mu.Lock()
			defer s.logs.mu.Unlock()
			for i, m := range s.logs.lines {
				if m["level"] == "debug" {
					sawReason = sawReason || strings.Contains(s.logs.raw[i], "secret")
					continue
				}
				assert.NotContains(t, strings.ToLower(s.logs.raw[i]), "bus", "the fallback's reason above debug level")
			}
			assert.Equal(t, level == "debug", sawReason, "the reason is logged at debug level:\n%s", strings.Join(s.logs.raw, "\n"))
		})
	}
}
