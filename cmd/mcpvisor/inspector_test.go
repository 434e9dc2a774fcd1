package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/interop"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// inspector returns the node binary and the script of the MCP Inspector's
// launcher (make deps installs @modelcontextprotocol/inspector into
// .deps/npm-inspector-<version>; MCPVISOR_INSPECTOR names the script, and
// MCPVISOR_NODE the Node >= 22 it asks for), or skips the test (fails it
// with MCPVISOR_REQUIRE_INTEROP=1).
func inspector(t *testing.T) (node, script string) {
	t.Helper()
	script = newestDep("npm-inspector-*/node_modules/.bin/mcp-inspector")
	if v := os.Getenv("MCPVISOR_INSPECTOR"); v != "" {
		script = v
	}
	node = "node"
	if v := os.Getenv("MCPVISOR_NODE"); v != "" {
		node = v
	}
	_, err := os.Stat(script)
	_, nodeErr := exec.LookPath(node)
	if err != nil || nodeErr != nil {
		msg := fmt.Sprintf("the MCP Inspector (make deps) or node is missing: %v", errorsOf(err, nodeErr))
		interop.Missing(t, msg)
	}
	return node, script
}

// newestDep is the last path of .deps matching pattern (make deps
// installs into a directory per version), or the pattern itself.
func newestDep(pattern string) string {
	dir, _ := filepath.Abs("../../.deps")
	matches, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(matches) == 0 {
		return filepath.Join(dir, pattern)
	}
	return matches[len(matches)-1]
}

// errorsOf is the first non-nil error.
func errorsOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// inspectorPatience bounds one run of the Inspector: twice
// testwait.Patience, since a run is node's start (seconds under load),
// then over stdio the start of supervise and of the servers it waits for,
// and three such runs go side by side.
const inspectorPatience = 2 * testwait.Patience

// inspectorRun runs `mcp-inspector --cli` with args (its options, then the
// server: a URL, or `--` and a command) and decodes its stdout, which
// must be one JSON value, into out. It returns why not: a run that fails
// (the Inspector exits non-zero on an error) or prints something else.
// It may be called from any goroutine. A run is given inspectorPatience.
func inspectorRun(t *testing.T, node, script string, out any, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), inspectorPatience)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script, "--cli"}, args...)...)
	// The Inspector keeps a catalog under the home; give it its own.
	cmd.Env = cliEnv("HOME=" + t.TempDir())
	cmd.WaitDelay = time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err == nil {
		err = json.Unmarshal(stdout, out)
	}
	if err != nil {
		return fmt.Errorf("inspector %s: %w\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout, stderr.String())
	}
	return nil
}

type inspectorTools struct {
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type inspectorResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
}

// inspectorServers is a config whose servers take 0, 1 and 3 s to start
// (the slowest on an older protocol version), beside a lazy one that
// would take a minute (it must not hold the first list back) and a
// disabled one. It returns the config and the servers whose tools the
// first list must have.
func inspectorServers(t *testing.T, bin string) (string, []string) {
	lazy := mock(bin, "--name", "lazy", "--init-delay", "1m")
	lazy["lazy"] = true
	off := mock(bin, "--name", "off")
	off["disabled"] = true
	cfg := writeConfig(t, map[string]any{
		"fast":  mock(bin, "--name", "fast"),
		"one":   mock(bin, "--name", "one", "--init-delay", "1s"),
		"three": mock(bin, "--name", "three", "--init-delay", "3s", "--versions", "2025-06-18"),
		"lazy":  lazy,
		"off":   off,
	})
	return cfg, []string{"fast", "one", "three"}
}

// checkInspector has the Inspector list the tools once through server
// (the arguments that name the gateway) and checks that the list has
// every server's echo, then calls every server's echo, each call its own
// Inspector run, all at once, and checks each answer. It returns the
// time from t0 to the end of the listing run.
func checkInspector(t *testing.T, node, script string, t0 time.Time, servers []string, server ...string) time.Duration {
	var list inspectorTools
	require.NoError(t, inspectorRun(t, node, script, &list, append([]string{"--method", "tools/list"}, server...)...))
	listed := time.Since(t0)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	for _, s := range servers {
		assert.Contains(t, names, s+"__echo", "the first tools/list (%d tools) has every server's tools", len(names))
	}
	if t.Failed() {
		return listed
	}

	var wg sync.WaitGroup
	results := make([]inspectorResult, len(servers))
	errs := make([]error, len(servers))
	for i, s := range servers {
		wg.Go(func() {
			errs[i] = inspectorRun(t, node, script, &results[i], append([]string{"--method", "tools/call",
				"--tool-name", s + "__echo", "--tool-arg", "text=hello " + s}, server...)...)
		})
	}
	testwait.CallWithin(t, inspectorPatience+5*time.Second, "the Inspector's calls", wg.Wait)
	for i, s := range servers {
		require.NoError(t, errs[i])
		require.Len(t, results[i].Content, 1, "tools/call %s__echo: %+v", s, results[i])
		assert.False(t, results[i].IsError, "tools/call %s__echo: %+v", s, results[i])
		assert.Equal(t, "hello "+s, results[i].Content[0].Text, "tools/call %s__echo", s)
	}
	return listed
}

// The MCP Inspector's CLI does what a developer does first, against
// servers that take 0, 1 and 3 s to start: `--method tools/list` once,
// then `--method tools/call` of a tool of every server. Over stdio each
// run starts `supervise --stdio` itself, so every call also arrives while
// its server is still starting (it waits for it; before issue 35 it was
// "unknown tool"); over HTTP the list runs the moment the gateway's port
// answers. The first list has every server's tools (with --startup-wait 0
// it had part of the pool).
func TestInspectorCLIAtStartUp(t *testing.T) {
	node, script := inspector(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	// The Inspector starts a stdio server with a few variables of its own
	// environment, and those of -e.
	gorace := "GORACE=atexit_sleep_ms=0 halt_on_error=1"

	// The two runs wait for servers to start more than they work: side by
	// side, they take the time of the longer.
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		cfg, servers := inspectorServers(t, bin)
		t0 := time.Now()
		listed := checkInspector(t, node, script, t0, servers, "-e", gorace, "--",
			bin, "supervise", "--stdio", "--config", cfg, "--state-dir", t.TempDir())
		t.Logf("the Inspector's tools/list over stdio ended %v after it started (node, supervise --stdio, servers, list); all took %v",
			listed.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	})
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		cfg, servers := inspectorServers(t, bin)
		addr := freePort(t)
		t0 := time.Now()
		cmd := exec.Command(bin, "supervise", "--config", cfg, "--listen", addr, "--state-dir", t.TempDir())
		p := startLogged(t, cmd)
		// Start the Inspector the moment the port answers.
		testwait.Call(t, "the gateway's port to answer", func() {
			for {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err == nil {
					_ = c.Close()
					return
				}
				if testwait.Context(t).Err() != nil {
					return
				}
				time.Sleep(5 * time.Millisecond) // testwait:ok polling a port that is about to listen
			}
		})
		answered := time.Since(t0)
		listed := checkInspector(t, node, script, t0, servers, "--transport", "http", "http://"+addr+"/mcp")
		t.Logf("the port answered %v after supervise started; the Inspector's tools/list ended %v after it started",
			answered.Round(time.Millisecond), listed.Round(time.Millisecond))
		require.NoError(t, cmd.Process.Signal(os.Interrupt))
		require.NoError(t, p.wait(t), "supervise exits cleanly on SIGINT; log:\n%s", p.logs)
	})
}
