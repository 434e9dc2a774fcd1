package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// binPath is the mcpvisor binary under test, built once by TestMain. The
// tests run it as a subprocess, and the configs they write use its mock
// command as their servers.
var binPath string

// sharedStateDir is the state directory (approvals, tool pins) of the
// tests that do not use their own: never the user's.
var sharedStateDir string

func TestMain(m *testing.M) {
	mcpvisor.HelperMain()
	dir, err := os.MkdirTemp("", "mcpvisor-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	binPath = filepath.Join(dir, "mcpvisor")
	sharedStateDir = filepath.Join(dir, "state")
	args := []string{"build", "-o", binPath}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building mcpvisor:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}

	code := m.Run()
	if code == 0 {
		if left := processesWith(dir, 0); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "processes of the binary under test left running: %v\n", left)
			code = 1
		}
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// cliEnv is the environment of the binary under test (and so of its mock
// servers).
func cliEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, mockserver.EnvRole+"=") {
			env = append(env, kv)
		}
	}
	// A race-enabled binary sleeps 1 s at every exit by default.
	env = append(env, "GORACE=atexit_sleep_ms=0 halt_on_error=1", envStateDir+"="+sharedStateDir)
	return append(env, extra...) // later entries win
}

type result struct {
	stdout, stderr string
	// rawStderr is stderr as written; in stderr, the JSON line of the
	// error that ends the command reads as in text mode ("mcpvisor:
	// <err>" and the hint), so that tests of what an error says need not
	// unescape it.
	rawStderr string
	code      int
}

// plainFinalError rewrites the JSON line of the final error (the one with
// an exit_code) as text mode writes it; the other lines are kept.
func plainFinalError(stderr string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(stderr, "\n") {
		var m struct {
			Level    string `json:"level"`
			Message  string `json:"message"`
			Hint     string `json:"hint"`
			ExitCode *int   `json:"exit_code"`
		}
		if json.Unmarshal([]byte(line), &m) != nil || m.ExitCode == nil || m.Level != "error" {
			b.WriteString(line)
			continue
		}
		b.WriteString("mcpvisor: " + m.Message + "\n")
		if m.Hint != "" {
			b.WriteString(m.Hint + "\n")
		}
	}
	return b.String()
}

// cli runs the binary under test to completion (at most 30 s).
func cli(t *testing.T, args ...string) result {
	t.Helper()
	return cliIn(t, "", nil, args...)
}

// cliIn runs the binary in directory dir with extra environment entries.
func cliIn(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Dir = dir
	cmd.Env = cliEnv(env...)
	cmd.WaitDelay = time.Second // a process left holding stdout must not keep Run waiting
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	code := 0
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else {
		require.NoError(t, err)
	}
	require.NoError(t, ctx.Err(), "mcpvisor %v did not finish in time; stderr:\n%s", args, stderr.String())
	return result{stdout: stdout.String(), stderr: plainFinalError(stderr.String()), rawStderr: stderr.String(), code: code}
}

// mock is a config entry for a mock server run by bin's mock command.
func mock(bin string, args ...string) map[string]any {
	return map[string]any{"command": bin, "args": append([]string{"mock"}, args...)}
}

// writeConfig writes an .mcp.json file with these servers and returns its
// path.
func writeConfig(t *testing.T, servers map[string]any) string {
	t.Helper()
	data, err := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "mcp.json")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

type listOut struct {
	Servers []struct {
		Name            string `json:"name"`
		State           string `json:"state"`
		ProtocolVersion string `json:"protocolVersion"`
		Tools           int    `json:"tools"`
		Error           string `json:"error"`
	} `json:"servers"`
	Tools []struct {
		Name        string          `json:"name"`
		Server      string          `json:"server"`
		Tool        string          `json:"tool"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Annotations json.RawMessage `json:"annotations"`
	} `json:"tools"`
	Skipped []struct {
		Layer  string   `json:"layer"`
		File   string   `json:"file"`
		Errors []string `json:"errors"`
	} `json:"skipped"`
}

// decodeList decodes list --json output, which must be exactly one JSON
// object with exactly the documented members.
func decodeList(t *testing.T, stdout string) listOut {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	var raw map[string]json.RawMessage
	require.NoError(t, dec.Decode(&raw), "stdout: %s", stdout)
	var extra any
	require.ErrorIs(t, dec.Decode(&extra), io.EOF, "stdout holds exactly one JSON value")
	assert.ElementsMatch(t, []string{"servers", "tools", "skipped"}, keys(raw))

	var shape struct {
		Servers []map[string]json.RawMessage `json:"servers"`
		Tools   []map[string]json.RawMessage `json:"tools"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &shape))
	for _, s := range shape.Servers {
		assert.ElementsMatch(t, []string{"name", "state", "protocolVersion", "tools", "error"}, keys(s))
	}
	for _, tl := range shape.Tools {
		assert.ElementsMatch(t, []string{"name", "server", "tool", "description", "inputSchema", "annotations"}, keys(tl))
	}

	var out listOut
	require.NoError(t, json.Unmarshal([]byte(stdout), &out))
	return out
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestListJSONAllReady(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, map[string]any{
		"a":    mock(binPath),
		"b":    mock(binPath, "-tools", "2", "-versions", "2025-06-18"),
		"off":  map[string]any{"command": binPath, "args": []string{"mock"}, "disabled": true},
		"lazy": map[string]any{"command": binPath, "args": []string{"mock"}, "lazy": true},
	})
	r := cli(t, "list", "--json", "--config", cfg)
	require.Equal(t, 0, r.code, "disabled and lazy servers do not count; stderr: %s", r.stderr)

	out := decodeList(t, r.stdout)
	require.Len(t, out.Servers, 4)
	a, b, lazy, off := out.Servers[0], out.Servers[1], out.Servers[2], out.Servers[3]
	assert.Equal(t, "lazy", lazy.Name)
	assert.Equal(t, "pending", lazy.State, "lazy servers are not connected")
	assert.Equal(t, "a", a.Name)
	assert.Equal(t, "ready", a.State)
	assert.Equal(t, 5, a.Tools, "echo, add, fail, sleep, announce")
	assert.NotEmpty(t, a.ProtocolVersion)
	assert.Empty(t, a.Error)
	assert.Equal(t, "b", b.Name)
	assert.Equal(t, "ready", b.State)
	assert.Equal(t, "2025-06-18", b.ProtocolVersion)
	assert.Equal(t, 7, b.Tools)
	assert.Equal(t, "off", off.Name)
	assert.Equal(t, "disabled", off.State)
	assert.Zero(t, off.Tools)

	require.Len(t, out.Tools, 12)
	byName := map[string]int{}
	for i, tl := range out.Tools {
		byName[tl.Name] = i
	}
	require.Contains(t, byName, "mcp__a__echo")
	echo := out.Tools[byName["mcp__a__echo"]]
	assert.Equal(t, "a", echo.Server)
	assert.Equal(t, "echo", echo.Tool)
	assert.Equal(t, "Echoes its text argument back.", echo.Description)
	assert.JSONEq(t, `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`, string(echo.InputSchema))
	assert.JSONEq(t, `{"readOnlyHint":true,"idempotentHint":true}`, string(echo.Annotations))
	require.Contains(t, byName, "mcp__b__tool_002")
	assert.Equal(t, "null", string(out.Tools[byName["mcp__a__add"]].Annotations))
}

func TestListFailingServer(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, map[string]any{
		"good": mock(binPath),
		"bad":  mock(binPath, "-exit-at-start"),
	})
	r := cli(t, "list", "--json", "--config", cfg)
	assert.Equal(t, 1, r.code, "stderr: %s", r.stderr)

	out := decodeList(t, r.stdout)
	require.Len(t, out.Servers, 2)
	bad, good := out.Servers[0], out.Servers[1]
	assert.Equal(t, "bad", bad.Name)
	assert.Equal(t, "failed", bad.State)
	assert.NotEmpty(t, bad.Error)
	assert.Zero(t, bad.Tools)
	assert.Equal(t, "ready", good.State)
	for _, tl := range out.Tools {
		assert.Equal(t, "good", tl.Server)
	}
}

func TestListTables(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, map[string]any{
		"calc":     mock(binPath),
		"filtered": map[string]any{"command": binPath, "args": []string{"mock"}, "tools": map[string]any{"deny": []string{"sleep"}}},
		"bad":      mock(binPath, "-exit-at-start"),
	})
	r := cli(t, "list", "--config", cfg)
	assert.Equal(t, 1, r.code, "stderr: %s", r.stderr)

	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), 6, r.stdout)
	assert.Regexp(t, `^SERVER +STATE +TRANSPORT +PROTOCOL +TOOLS +ERROR$`, lines[0])
	assert.Regexp(t, `^bad +failed +stdio +- +- +\S`, lines[1])
	assert.Regexp(t, `^calc +ready +stdio +\d{4}-\d\d-\d\d +5$`, lines[2])
	assert.Regexp(t, `^filtered +ready +stdio +\d{4}-\d\d-\d\d +4 of 5$`, lines[3])
	assert.Equal(t, "", lines[4])
	assert.Regexp(t, `^TOOL +DESCRIPTION$`, lines[5])
	assert.Contains(t, r.stdout, "\nmcp__calc__echo ")
	assert.Regexp(t, `(?m)^mcp__calc__add +Adds two numbers\.$`, r.stdout)
	assert.NotContains(t, r.stdout, "mcp__filtered__sleep")
	for _, l := range lines {
		assert.Equal(t, strings.TrimRight(l, " "), l, "no trailing blanks")
	}
}

func TestListConfigErrors(t *testing.T) {
	t.Parallel()
	malformed := filepath.Join(t.TempDir(), "broken.json")
	require.NoError(t, os.WriteFile(malformed, []byte(`{"mcpServers": {`), 0o644))
	unset := writeConfig(t, map[string]any{
		"s": mock(binPath, "-name", "${MCPVISOR_TEST_SURELY_UNSET}"),
	})

	for name, tc := range map[string]struct {
		config string
		want   string
	}{
		"malformed": {malformed, "invalid JSON"},
		"missing":   {filepath.Join(t.TempDir(), "nope.json"), "no such file"},
		"unset var": {unset, "MCPVISOR_TEST_SURELY_UNSET"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := cli(t, "list", "--json", "--config", tc.config)
			assert.Equal(t, 1, r.code)
			assert.Contains(t, r.stderr, tc.want)
			assert.Contains(t, r.stderr, "config error")
			out := decodeList(t, r.stdout)
			assert.Empty(t, out.Servers)
			assert.Empty(t, out.Tools)
		})
	}
}

func TestListLaterConfigWins(t *testing.T) {
	t.Parallel()
	first := writeConfig(t, map[string]any{
		"a": mock(binPath, "-tools", "1"),
		"b": mock(binPath),
	})
	second := writeConfig(t, map[string]any{
		"a": mock(binPath, "-tools", "3"),
	})
	r := cli(t, "list", "--json", "--config", first, "--config", second)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	out := decodeList(t, r.stdout)
	require.Len(t, out.Servers, 2)
	assert.Equal(t, 8, out.Servers[0].Tools, "a comes from the second file")
	assert.Equal(t, "b", out.Servers[1].Name)
}

// Without --config the layers of the working directory (and home) apply.
func TestListLayeredDiscovery(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/etc/mcpvisor/managed-mcp.json"); err == nil {
		t.Skip("a managed config file exists on this machine and would win")
	}
	home, project := t.TempDir(), t.TempDir()
	write := func(path string, servers map[string]any) {
		data, err := json.Marshal(map[string]any{"mcpServers": servers})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, data, 0o644))
	}
	write(filepath.Join(home, ".mcp.json"), map[string]any{"user": mock(binPath)})
	write(filepath.Join(project, ".mcp.json"), map[string]any{"p": mock(binPath)})
	write(filepath.Join(project, ".mcp.local.json"), map[string]any{"p": mock(binPath, "-tools", "1")})

	// (The project's servers need approval: see trust_test.go.)
	r := cliIn(t, project, []string{"HOME=" + home}, "list", "--json", "--trust-project")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	out := decodeList(t, r.stdout)
	require.Len(t, out.Servers, 2)
	assert.Equal(t, "p", out.Servers[0].Name)
	assert.Equal(t, 6, out.Servers[0].Tools, "the local layer wins over the project layer")
	assert.Equal(t, "user", out.Servers[1].Name)
}

// A project .mcp.json that does not load leaves the user's servers
// running: list says which file and why, and exits 0. The same file named
// with --config fails the command.
func TestListBrokenProjectLayer(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/etc/mcpvisor/managed-mcp.json"); err == nil {
		t.Skip("a managed config file exists on this machine and would win")
	}
	home, project := t.TempDir(), t.TempDir()
	data, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"user": mock(binPath)}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(home, ".mcp.json"), data, 0o644))
	broken := filepath.Join(project, ".mcp.json")
	require.NoError(t, os.WriteFile(broken, []byte(`{"mcpServers": {"p": `), 0o644))

	r := cliIn(t, project, []string{"HOME=" + home}, "list", "--json")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	out := decodeList(t, r.stdout)
	require.Len(t, out.Servers, 1)
	assert.Equal(t, "user", out.Servers[0].Name)
	assert.Equal(t, "ready", out.Servers[0].State)
	require.Len(t, out.Skipped, 1)
	assert.Equal(t, "project", out.Skipped[0].Layer)
	assert.True(t, samePath(broken, out.Skipped[0].File), "skipped file %q, want %q", out.Skipped[0].File, broken)
	require.Len(t, out.Skipped[0].Errors, 1)
	assert.Contains(t, out.Skipped[0].Errors[0], "invalid JSON")
	assert.Contains(t, r.stderr, "config file skipped")
	assert.Contains(t, r.stderr, ".mcp.json")
	assert.Contains(t, r.stderr, "invalid JSON")

	r = cliIn(t, project, []string{"HOME=" + home}, "list")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Regexp(t, `(?m)^user +ready `, r.stdout)
	assert.Regexp(t, `(?m)^Skipped config file .*\.mcp\.json \(project layer\): it does not load$`, r.stdout)
	assert.Regexp(t, `(?m)^  .*invalid JSON`, r.stdout)

	r = cliIn(t, project, []string{"HOME=" + home}, "list", "--json", "--config", broken)
	assert.Equal(t, 1, r.code, "a file named with --config must load; stderr: %s", r.stderr)
	assert.Contains(t, r.stderr, "config error")
	assert.Contains(t, r.stderr, "invalid JSON")
	assert.Empty(t, decodeList(t, r.stdout).Servers)
}

func TestListTimeout(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, map[string]any{
		"quick":    mock(binPath),
		"sluggish": mock(binPath, "-init-delay", "20s"),
	})
	start := time.Now()
	// quick has 3 s to be ready: it starts through the process helper,
	// whose start (a race-enabled binary here) takes a few hundred ms on a
	// loaded machine.
	r := cli(t, "list", "--json", "--timeout", "3s", "--config", cfg)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "servers still connecting when the timeout passed")
	out := decodeList(t, r.stdout)
	require.Len(t, out.Servers, 2)
	assert.Equal(t, "ready", out.Servers[0].State)
	assert.Equal(t, "connecting", out.Servers[1].State)
	assert.Less(t, time.Since(start), 10*time.Second, "the close is bounded")
}

// A short name two servers offer is not guessed: call names both.
func TestCallAShortNameTwoServersOffer(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, map[string]any{"one": mock(binPath), "two": mock(binPath)})
	r := cli(t, "call", "--config", cfg, "echo", `{"text":"x"}`)
	assert.Equal(t, 1, r.code)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "unknown tool")
	assert.Contains(t, r.stderr, "mcp__one__echo")
	assert.Contains(t, r.stderr, "mcp__two__echo")
}

func TestCall(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, map[string]any{
		"calc": mock(binPath),
		"bad":  mock(binPath, "-exit-at-start"),
	})

	t.Run("success", func(t *testing.T) {
		t.Parallel()
		r := cli(t, "call", "--config", cfg, "mcp__calc__add", `{"a": 2, "b": 40}`)
		require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
		assert.JSONEq(t, `{"content":[{"type":"text","text":"42"}],"structuredContent":{"sum":42}}`, r.stdout)
		assert.Contains(t, r.stdout, "\n  \"content\"", "indented")
	})
	t.Run("default arguments", func(t *testing.T) {
		t.Parallel()
		r := cli(t, "call", "--config", cfg, "mcp__calc__echo")
		require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
		assert.JSONEq(t, `{"content":[{"type":"text","text":""}]}`, r.stdout)
	})
	t.Run("isError", func(t *testing.T) {
		t.Parallel()
		r := cli(t, "call", "--config", cfg, "mcp__calc__fail")
		assert.Equal(t, 1, r.code)
		assert.JSONEq(t, `{"content":[{"type":"text","text":"this tool always fails"}],"isError":true}`, r.stdout)
		assert.Contains(t, r.stderr, "isError")
	})
	t.Run("short name", func(t *testing.T) {
		t.Parallel()
		for _, name := range []string{"echo", "calc__echo"} {
			r := cli(t, "call", "--config", cfg, name, `{"text":"short"}`)
			require.Equal(t, 0, r.code, "%s: exactly one server offers it; stderr: %s", name, r.stderr)
			assert.JSONEq(t, `{"content":[{"type":"text","text":"short"}]}`, r.stdout)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		t.Parallel()
		r := cli(t, "call", "--config", cfg, "nope")
		assert.Equal(t, 1, r.code)
		assert.Empty(t, r.stdout)
		assert.Contains(t, r.stderr, "unknown tool")
	})
	t.Run("server not ready", func(t *testing.T) {
		t.Parallel()
		r := cli(t, "call", "--config", cfg, "mcp__bad__echo", `{"text":"x"}`)
		assert.Equal(t, 1, r.code)
		assert.Empty(t, r.stdout)
		assert.Contains(t, r.stderr, "its server is not ready")
		assert.Contains(t, r.stderr, `"state":"failed"`)
	})
	for name, args := range map[string][]string{
		"args not JSON":    {"mcp__calc__add", `{"a":`},
		"args not object":  {"mcp__calc__add", `[1, 2]`},
		"args null":        {"mcp__calc__add", `null`},
		"no tool":          {},
		"too many args":    {"mcp__calc__add", `{}`, `{}`},
		"bad timeout":      {"--timeout", "soon", "mcp__calc__add"},
		"negative timeout": {"--timeout", "-1s", "mcp__calc__add"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := cli(t, append([]string{"call", "--config", cfg}, args...)...)
			assert.Equal(t, 2, r.code, "stderr: %s", r.stderr)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, "Run 'mcpvisor call --help' for usage.")
		})
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{
		"unknown command":   {"frobnicate"},
		"unknown flag":      {"list", "--frobnicate"},
		"list argument":     {"list", "extra"},
		"bad log level":     {"--log-level", "loud", "list"},
		"bad list timeout":  {"list", "--timeout", "0s"},
		"supervise argment": {"supervise", "extra"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := cli(t, args...)
			assert.Equal(t, 2, r.code, "stderr: %s", r.stderr)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, "--help' for usage.")
		})
	}
}

// The bundled example runs as it is: its relative command, bin/mcpvisor,
// resolves against the supervisor's working directory.
func TestDemoConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyBinary(t, filepath.Join(dir, "bin", "mcpvisor"))
	demo, err := filepath.Abs(filepath.Join("..", "..", "examples", "demo.mcp.json"))
	require.NoError(t, err)

	r := cliIn(t, dir, nil, "list", "--json", "--config", demo)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	out := decodeList(t, r.stdout)
	states := map[string]string{}
	versions := map[string]string{}
	for _, s := range out.Servers {
		states[s.Name], versions[s.Name] = s.State, s.ProtocolVersion
	}
	assert.Equal(t, map[string]string{
		"calc": "ready", "catalog": "ready", "legacy": "ready", "slow": "ready", "off": "disabled",
	}, states)
	assert.Equal(t, "2025-06-18", versions["legacy"])

	// ${DEMO_LATENCY:-50ms} is expanded: a value that is not a duration
	// makes the slow server fail.
	r = cliIn(t, dir, []string{"DEMO_LATENCY=soon"}, "list", "--json", "--config", demo)
	assert.Equal(t, 1, r.code)
	for _, s := range decodeList(t, r.stdout).Servers {
		if s.Name == "slow" {
			assert.Equal(t, "failed", s.State)
		}
	}
}

// copyBinary gives the binary under test a second name, path, so that the
// processes it starts can be told apart by their command line. It is a hard
// link where it can be: a copy is a file open for writing, and a process
// forked by a parallel test meanwhile holds that descriptor until its exec,
// so executing the fresh copy could fail with ETXTBSY ("text file busy").
// A link writes nothing; a copy is the fallback across file systems.
func copyBinary(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	if os.Link(binPath, path) == nil {
		return
	}
	src, err := os.Open(binPath)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, errors.Join(err, dst.Close()))
}

// processesWith returns the live (not zombie) processes other than
// exclude whose command line contains s.
func processesWith(s string, exclude int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == exclude || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(s)) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 {
			if f := bytes.Fields(stat[i+1:]); len(f) > 0 && (string(f[0]) == "Z" || string(f[0]) == "X") {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// logLines collects the JSON log lines a process writes.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
	raw   []string
	more  chan struct{} // signalled after each line
}

func (l *logLines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var m map[string]any
		_ = json.Unmarshal(sc.Bytes(), &m)
		l.mu.Lock()
		l.lines = append(l.lines, m)
		l.raw = append(l.raw, sc.Text())
		l.mu.Unlock()
		select {
		case l.more <- struct{}{}:
		default:
		}
	}
}

// waitFor waits until ok holds for the lines so far.
func (l *logLines) waitFor(t *testing.T, timeout time.Duration, what string, ok func([]map[string]any) bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		done := ok(l.lines)
		l.mu.Unlock()
		if done {
			return
		}
		select {
		case <-l.more:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s; log:\n%s", what, l.String())
		}
	}
}

// String is the log as the process wrote it, less the race detector's
// reports of protoactor's BlockList race (see startClusterMember): each
// is some 60 lines of protoactor's stacks that would bury the rest of a
// failing cluster test's output; a line says how many were left out.
// Every other race report is kept whole.
func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out, report []string
	omitted := 0
	for _, line := range l.raw {
		switch {
		case report == nil && line == raceReportRule:
			report = []string{line}
		case report != nil:
			report = append(report, line)
			if line != raceReportRule || len(report) < 3 {
				continue
			}
			if strings.Contains(strings.Join(report, "\n"), "remote.(*BlockList)") {
				omitted++
			} else {
				out = append(out, report...)
			}
			report = nil
		default:
			out = append(out, line)
		}
	}
	out = append(out, report...) // a report the process did not finish
	if omitted > 0 {
		out = append(out, fmt.Sprintf("(%d race reports of protoactor's remote.BlockList left out)", omitted))
	}
	return strings.Join(out, "\n")
}

// raceReportRule opens and closes each of the race detector's reports.
const raceReportRule = "=================="

func TestSupervise(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	cfg := writeConfig(t, map[string]any{
		"a":      mock(bin),
		"legacy": mock(bin, "-versions", "2025-06-18"),
		"parent": mock(bin, "-grandchild"),
		// Two quick reconnect attempts, then parked in failed.
		"bad": map[string]any{"command": bin, "args": []string{"mock", "-exit-at-start"},
			"reconnect": map[string]any{"maxAttempts": 2, "initialDelay": "10ms", "maxDelay": 20}},
		"off": map[string]any{"command": bin, "args": []string{"mock"}, "disabled": true},
	})

	cmd := exec.Command(bin, "supervise", "--config", cfg, "--listen", "127.0.0.1:0")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	p := startLogged(t, cmd)
	logs := p.logs

	want := map[string]string{"a": "ready", "legacy": "ready", "parent": "ready", "bad": "failed", "off": "disabled"}
	logs.waitFor(t, 20*time.Second, "every server to settle", func(lines []map[string]any) bool {
		got := map[string]string{}
		for _, m := range lines {
			if m["message"] == "server state" {
				got[fmt.Sprint(m["server"])] = fmt.Sprint(m["state"])
			}
		}
		for name, state := range want {
			if got[name] != state {
				return false
			}
		}
		return true
	})
	logs.waitFor(t, 5*time.Second, "the pool of three servers", func(lines []map[string]any) bool {
		for _, m := range lines {
			if m["message"] == "tools_changed" && m["tools"] == float64(15) {
				return true
			}
		}
		return false
	})
	running := processesWith(dir, cmd.Process.Pid)
	assert.GreaterOrEqual(t, len(running), 4, "three mock servers and a grandchild run")

	// The gateway: the pool over Streamable HTTP, and the status.
	base := gatewayURL(t, logs)
	st := cli(t, "status", "--url", base)
	require.Equal(t, 0, st.code, st.stderr)
	assert.Regexp(t, `(?m)^a +connected +file +ready +5 `, st.stdout, "the SDK's status and the scope (a file named with --config) before the state")
	assert.Regexp(t, `(?m)^bad +failed +file +failed `, st.stdout)
	assert.Regexp(t, `(?m)^off +disabled +file +disabled `, st.stdout)
	body := mcpPost(t, base, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	assert.Contains(t, body, `"serverInfo":{"name":"mcpvisor"`)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t), "exit status 0 after SIGTERM; log:\n%s", logs)
	assert.Empty(t, stdout.String(), "supervise prints nothing on stdout")

	// Close returned: nothing the supervisor started may be left, the
	// grandchild included. Allow a moment for the kernel's bookkeeping.
	var left []int
	for deadline := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		if left = processesWith(dir, 0); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	assert.Empty(t, left, "processes left behind")

	var summary, failedState map[string]any
	var sawShutdown, sawStopped bool
	for _, m := range logs.lines {
		switch {
		case m["message"] == "supervising":
			summary = m
		case m["message"] == "server state" && m["server"] == "bad" && m["state"] == "failed":
			failedState = m
		case m["message"] == "shutting down":
			sawShutdown = m["signal"] == "terminated"
		case m["message"] == "stopped":
			sawStopped = true
		}
	}
	require.NotNil(t, summary, "the start summary is logged")
	assert.Equal(t, []any{cfg}, summary["files"])
	assert.Equal(t, float64(5), summary["servers"])
	assert.Equal(t, float64(5), summary["added"])
	assert.Equal(t, float64(1), summary["disabled"])
	assert.Equal(t, float64(0), summary["errors"])
	require.NotNil(t, failedState)
	assert.Equal(t, "info", failedState["level"])
	assert.Equal(t, "connecting", failedState["previous"])
	assert.NotEmpty(t, failedState["error"])
	assert.True(t, sawShutdown, "the shutdown is logged with its signal")
	assert.True(t, sawStopped)
}

func TestSuperviseConfigError(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "broken.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"mcpServers": []}`), 0o644))
	r := cli(t, "supervise", "--config", cfg)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "config error")
	assert.Contains(t, r.stderr, cfg)
}

func TestMock(t *testing.T) {
	t.Parallel()
	t.Run("help", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"mock", "-h"}, {"mock", "--help"}, {"help", "mock"}} {
			r := cli(t, args...)
			require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
			// The layout of every other command: --name TYPE, in a column.
			for _, name := range []string{"latency duration", "exit-after int", "grandchild", "versions string"} {
				assert.Regexp(t, `(?m)^      --`+name+`\s{2,}\S`, r.stdout, "%v documents --%s", args, name)
			}
			assert.NotRegexp(t, `(?m)^\s*-[a-z]`, r.stdout, "no flag documented with one dash")
			assert.NotContains(t, r.stdout, " -channel", "usages name flags with two dashes")
		}
	})
	t.Run("both flag styles", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"mock", "--exit-at-start"}, {"mock", "-exit-at-start"}, {"mock", "--name", "x", "--exit-at-start"}, {"mock", "-name=x", "-exit-at-start"}} {
			assert.Equal(t, 4, cli(t, args...).code, "%v", args)
		}
	})
	t.Run("bad flag", func(t *testing.T) {
		t.Parallel()
		r := cli(t, "mock", "-frobnicate")
		assert.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, "-frobnicate")
		assert.Contains(t, r.stderr, "Run 'mcpvisor mock --help' for usage.")
	})
	t.Run("its own exit code", func(t *testing.T) {
		t.Parallel()
		assert.Equal(t, 4, cli(t, "mock", "-exit-at-start").code)
	})
	t.Run("serves stdio", func(t *testing.T) {
		t.Parallel()
		cmd := exec.CommandContext(testwait.Context(t), binPath, "mock", "-name", "m1", "-versions", "2025-06-18")
		cmd.Env = cliEnv()
		cmd.WaitDelay = time.Second
		cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"0"}}}` + "\n")
		out, err := cmd.Output()
		require.NoError(t, err, "stdin EOF ends the mock with status 0")
		var resp struct {
			ID     int `json:"id"`
			Result struct {
				ProtocolVersion string `json:"protocolVersion"`
				ServerInfo      struct {
					Name string `json:"name"`
				} `json:"serverInfo"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(out, &resp), "%s", out)
		assert.Equal(t, 1, resp.ID)
		assert.Equal(t, "2025-06-18", resp.Result.ProtocolVersion)
		assert.Equal(t, "m1", resp.Result.ServerInfo.Name)
	})
}

// gatewayURL waits for the "gateway listening" line and returns the base
// URL of the listener.
func gatewayURL(t *testing.T, logs *logLines) string {
	t.Helper()
	var url string
	logs.waitFor(t, 10*time.Second, "the gateway to listen", func(lines []map[string]any) bool {
		for _, m := range lines {
			if m["message"] == "gateway listening" {
				url = strings.TrimSuffix(fmt.Sprint(m["mcp"]), "/mcp")
				return true
			}
		}
		return false
	})
	return url
}

// httpClient is the tests' HTTP client: a request, body included, ends
// within testwait.Patience.
var httpClient = &http.Client{Timeout: testwait.Patience}

// mcpPost posts one message to the gateway and returns the body.
func mcpPost(t *testing.T, base, session, body string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := httpClient.Do(req)
	require.NoError(t, err, "POST %s", body)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "reading the answer to %s", body)
	return string(b)
}

// SIGHUP and --watch re-read the config and apply the difference; a broken
// config keeps the running one.
// Not parallel: its load would slow timing-sensitive tests.
func TestSuperviseReload(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	cfg := writeConfig(t, map[string]any{"a": mock(bin, "-name", "a")})
	write := func(content string) {
		tmp := cfg + ".tmp"
		require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
		require.NoError(t, os.Rename(tmp, cfg))
	}
	servers := func(m map[string]any) string {
		b, err := json.Marshal(map[string]any{"mcpServers": m})
		require.NoError(t, err)
		return string(b)
	}

	cmd := exec.Command(bin, "supervise", "--config", cfg, "--listen", "127.0.0.1:0", "--watch", "--watch-interval", "50ms")
	p := startLogged(t, cmd)
	logs := p.logs
	base := gatewayURL(t, logs)
	stateOf := func(name string) string {
		r := cli(t, "status", "--url", base, "--json")
		var rep struct {
			Servers []struct{ Name, State string }
		}
		if json.Unmarshal([]byte(r.stdout), &rep) != nil {
			return ""
		}
		for _, s := range rep.Servers {
			if s.Name == name {
				return s.State
			}
		}
		return ""
	}
	require.Eventually(t, func() bool { return stateOf("a") == "ready" }, 20*time.Second, 50*time.Millisecond)

	// The file watch: b appears.
	write(servers(map[string]any{"a": mock(bin, "-name", "a"), "b": mock(bin, "-name", "b")}))
	require.Eventually(t, func() bool { return stateOf("b") == "ready" }, 20*time.Second, 50*time.Millisecond)

	// A broken edit keeps the running config.
	write(`{"mcpServers": [`)
	logs.waitFor(t, 10*time.Second, "the failed reload", func(lines []map[string]any) bool {
		for _, m := range lines {
			if m["message"] == "config reload failed: keeping the running config" {
				return true
			}
		}
		return false
	})
	assert.Equal(t, "ready", stateOf("a"))
	assert.Equal(t, "ready", stateOf("b"))

	// SIGHUP: a is removed (written without waking the watch first is
	// not possible; either trigger applies it).
	write(servers(map[string]any{"b": mock(bin, "-name", "b")}))
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return stateOf("a") == "" || stateOf("a") == "stopped" }, 20*time.Second, 50*time.Millisecond)
	assert.Equal(t, "ready", stateOf("b"))

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t), "log:\n%s", logs)
}

// SIGTERM drains the calls in flight up to --grace: a call that finishes
// within it is answered and the exit is clean (0); one cut off makes the
// exit 1. The call that finishes lasts long enough (3 s) for the status
// polls to see it in flight on a loaded machine (a 400 ms call was missed
// there: "Condition never satisfied" on the in-flight wait).
func TestSuperviseDrain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		sleepMs  int
		grace    string
		wantCode int
	}{
		{"finishes", 3000, "30s", 0},
		{"cut off", 10000, "200ms", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each case waits out its call (3 s, 10 s) with its own process
			cfg := writeConfig(t, map[string]any{"a": mock(binPath, "-name", "a")})
			cmd := exec.Command(binPath, "supervise", "--config", cfg, "--listen", "127.0.0.1:0", "--grace", tc.grace)
			p := startLogged(t, cmd)
			logs := p.logs
			base := gatewayURL(t, logs)
			require.Eventually(t, func() bool {
				return strings.Contains(cli(t, "status", "--url", base).stdout, "ready")
			}, 20*time.Second, 50*time.Millisecond)
			init := mcpPost(t, base, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			require.Contains(t, init, "mcpvisor")
			answered := make(chan string, 1)
			go func() {
				// A stateless-era request needs no session.
				answered <- mcpPostNoFail(base, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"mcp__a__sleep","arguments":{"ms":%d}}}`, tc.sleepMs),
					"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "mcp__a__sleep")
			}()
			require.Eventually(t, func() bool {
				return strings.Contains(cli(t, "status", "--url", base).stdout, "1 requests in flight")
			}, 10*time.Second, 20*time.Millisecond)
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			err := p.wait(t)
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			assert.Equal(t, tc.wantCode, code, "log:\n%s", logs)
			body := testwait.Recv(t, answered, "the answer to the call in flight at SIGTERM")
			if tc.wantCode == 0 {
				assert.Contains(t, body, `"slept"`, "the call in flight was answered")
			}
		})
	}
}

// statelessToolCall calls tool through the gateway at base as a
// 2026-07-28 client does (_meta and the standard headers), without
// failing the test: the body is returned, or the error's text.
func statelessToolCall(base string, id int, tool, args string) string {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":%q,"arguments":%s}}`, id, tool, args)
	return mcpPostNoFail(base, body, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", tool)
}

// mcpPostNoFail posts one message with the given header pairs and returns
// the body, or the error's text.
func mcpPostNoFail(base, body string, headers ...string) string {
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return string(b) + err.Error()
	}
	return string(b)
}
