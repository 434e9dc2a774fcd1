package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/interop"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

func TestMain(m *testing.M) {
	mcpvisor.HelperMain()
	if mockserver.IsRequested() {
		os.Exit(mockserver.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// The official TypeScript SDK's client, against the running example,
// lists the pool's tool calc__add beside the host's own greet and calls
// both (testdata/tsclient/gatewayhost.mjs).
func TestGatewayHostServesPoolAndOwnToolToTSClient(t *testing.T) {
	modules := tsModules(t)
	ctx, cancel := context.WithCancel(testwait.Context(t))
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, pw, []string{"-log", "error"})
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("run did not return within 30 s of its context ending")
		}
	})

	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), URLPrefix); ok {
				urls <- u
			}
		}
		close(urls)
		_, _ = io.Copy(io.Discard, pr)
	}()
	var url string
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatalf("run ended before it listened: %v", testwait.Recv(t, done, "run's error"))
		}
		url = u
	case <-time.After(60 * time.Second):
		t.Fatal("no MCP endpoint printed within 60 s")
	}

	out := runNode(t, modules, "gatewayhost.mjs", url)
	t.Log("\n" + out)
	for _, want := range []string{"tools/list has the host's tool greet", "tools/call calc__add", "tools/call greet:"} {
		if !strings.Contains(out, "ok: "+want) {
			t.Errorf("no check %q passed", want)
		}
	}
}

// tsModules returns the node_modules directory holding the TypeScript
// SDK (make deps installs it into .deps/npm; MCPVISOR_NODE_MODULES names
// another), or skips the test (fails it with MCPVISOR_REQUIRE_INTEROP=1).
func tsModules(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs("../../.deps/npm/node_modules")
	if v := os.Getenv("MCPVISOR_NODE_MODULES"); v != "" {
		dir = v
	}
	_, err := os.Stat(filepath.Join(dir, "@modelcontextprotocol", "sdk", "package.json"))
	_, nodeErr := exec.LookPath("node")
	if err != nil || nodeErr != nil {
		msg := "the TypeScript SDK (make deps) or node is missing"
		interop.Missing(t, msg)
	}
	return dir
}

// runNode runs testdata/tsclient/<script> with args, from a directory
// whose node_modules is modules, and returns its output; the test fails
// when it does not exit 0.
func runNode(t *testing.T, modules, script string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("../../testdata/tsclient", script))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, script), src, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testwait.Context(t), "node", append([]string{filepath.Join(dir, script)}, args...)...)
	cmd.Dir = dir
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, out)
	}
	return string(out)
}
