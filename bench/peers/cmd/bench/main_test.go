package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/peers/harness"
)

// TestMain serves mcpvisor's process helper: the runner runs in this test
// binary, and starts its stdio servers through it.
func TestMain(m *testing.M) {
	mcpvisor.HelperMain()
	os.Exit(m.Run())
}

// TestRunnerSmoke runs every scenario with a tiny profile (a few calls,
// N=3) and checks that the report is written and reads back: results.json
// with a figure of every kind and no error, summary.md with its sections,
// and PNG plots that decode.
func TestRunnerSmoke(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run([]string{
		"-quick", "-out", out,
		"-transports", "stdio,http,ws", "-payloads", "16", "-inflight", "1,4", "-eras", "modern",
		"-calls", "20", "-duration", "200ms", "-warmup", "2",
		"-connect", "3", "-connect-http", "3", "-storm", "3", "-fanout", "1,3", "-fanout-ops", "2", "-sandbox-n", "3",
	}, &stdout, &stderr)
	t.Logf("ran in %v; stderr:\n%s", time.Since(start).Round(time.Millisecond), stderr.String())
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}

	data, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res harness.Results
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal("results.json:", err)
	}
	if len(res.Errors) > 0 {
		t.Errorf("errors: %q", res.Errors)
	}
	clients := map[string]bool{}
	for _, c := range res.Call {
		if c.Error == "" && c.Calls > 0 && c.CallsPerSec > 0 && c.P50Us > 0 && c.CPUPerCallUs > 0 {
			clients[c.Client+"/"+c.Transport] = true
		}
	}
	for _, want := range []string{"mcpvisor/stdio", "gosdk/stdio", "mcpgo/stdio", "floor/stdio", "mcpvisor/http", "gosdk/http", "mcpgo/http", "floor/http", "mcpvisor/ws"} {
		if !clients[want] {
			t.Errorf("no call figures for %s", want)
		}
	}
	// The servers scenario: every client against each server, with the
	// figures the call scenario has.
	served := map[string]bool{}
	for _, c := range res.Servers {
		if c.Error == "" && c.Calls > 0 && c.CallsPerSec > 0 && c.CPUPerCallUs > 0 {
			served[c.Server+"/"+c.Client] = true
		}
	}
	for _, server := range []string{harness.ServerMock, harness.ServerGoSDK, harness.ServerEverything} {
		for _, client := range []string{harness.Mcpvisor, harness.GoSDK, harness.McpGo} {
			if !served[server+"/"+client] {
				t.Errorf("no call figures for %s against %s (notes %q)", client, server, res.Notes)
			}
		}
	}
	if len(res.Connect) != 9 { // stdio: spawn + 3 clients + mcpgo-listen; http: 3 clients + mcpgo-listen
		t.Errorf("%d connect runs, want 9", len(res.Connect))
	}
	listen := 0
	for _, c := range res.Connect {
		if c.Client == harness.McpGoListen {
			listen++
		}
	}
	if listen != 2 {
		t.Errorf("%d mcpgo-listen connect runs, want one per transport", listen)
	}
	for _, c := range res.Connect {
		if c.Error != "" || c.AllReadyMs <= 0 {
			t.Errorf("connect %s %s: %+v", c.Client, c.Transport, c)
		}
	}
	if len(res.Storm) != 1 || res.Storm[0].Failed != 3 || res.Storm[0].AllReadyAgainMs <= 0 {
		t.Errorf("storm: %+v", res.Storm)
	}
	if len(res.FanOut) != 2 || res.FanOut[1].Ops != 2 || res.FanOut[1].DeliveryP50Us <= 0 {
		t.Errorf("fan-out: %+v", res.FanOut)
	}
	if len(res.Sandbox) == 0 || res.Sandbox[0].Variant != harness.Unconfined || res.Sandbox[0].MedianReadyMs <= 0 || res.Sandbox[0].Calls.Calls == 0 {
		t.Errorf("sandbox: %+v", res.Sandbox)
	}
	for _, s := range res.Sandbox {
		if s.Error != "" {
			t.Errorf("sandbox %s: %s", s.Variant, s.Error)
		}
	}
	if len(res.Targets) == 0 || res.Machine.Cores == 0 || res.Machine.GoVersion == "" {
		t.Errorf("targets %d, machine %+v", len(res.Targets), res.Machine)
	}

	md, err := os.ReadFile(filepath.Join(out, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Targets (issues 6, 21 and 26)", "CPU to connect N servers ≤ 0.7× mcp-go's (issue 21)", "## Calls", "## Calls against servers no one here wrote", "## Connect", "## Reconnect storm", "## Fan-out", "## Sandbox", "![latency-stdio-16B-modern](latency-stdio-16B-modern.png)"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("summary.md lacks %q", want)
		}
	}
	plots, _ := filepath.Glob(filepath.Join(out, "*.png"))
	if len(plots) < 5 {
		t.Errorf("%d plots: %v", len(plots), plots)
	}
	for _, p := range plots {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(f); err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
		f.Close()
	}
	if !strings.Contains(stdout.String(), "summary.md") {
		t.Errorf("stdout: %q", stdout.String())
	}
}

// The help lays flags out as mcpvisor's other commands do (--name TYPE,
// the usage in a column), and both --flag and -flag are accepted.
func TestHelpLayout(t *testing.T) {
	for _, h := range []string{"-h", "--help"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{h}, &stdout, &stderr); code != 0 {
			t.Fatalf("%s: exit %d: %s", h, code, stderr.String())
		}
		help := stderr.String()
		for _, want := range []string{"\n      --quick ", "\n      --out directory ", "\n      --calls N ", "--scenarios, comma-separated"} {
			if !strings.Contains(help, want) {
				t.Errorf("%s: help lacks %q:\n%s", h, want, help)
			}
		}
		for _, line := range strings.Split(help, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "-") && !strings.HasPrefix(strings.TrimSpace(line), "--") {
				t.Errorf("%s: a flag documented with one dash: %q", h, line)
			}
		}
	}
	for _, args := range [][]string{{"--calls", "x"}, {"-calls", "x"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "invalid value \"x\" for flag -calls") {
			t.Errorf("%v: exit %d, want 2 and the flag named: %s", args, code, stderr.String())
		}
	}
}
