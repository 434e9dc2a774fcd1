package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
)

func TestMain(m *testing.M) {
	mcpvisor.HelperMain()
	// run's bundled config starts "${AGENTHOST_BIN} mock ...": here
	// ${AGENTHOST_BIN} is this test binary, which must serve as the mock.
	switch {
	case len(os.Args) > 1 && os.Args[1] == "mock":
		os.Exit(mockserver.Main(os.Args[2:]))
	case mockserver.IsRequested():
		os.Exit(mockserver.Main(os.Args[1:]))
	}
	// The mock servers are this race-enabled binary too: without this,
	// each of them sleeps 1 s on exit.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	goleak.VerifyTestMain(m)
}

// The test's working directory is the package's, which holds the bundled
// home and project folders.
var bundled = []string{"-dir", "project", "-home", "home", "-log", "error"}

func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, bundled); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")

	// Every layer was read; the local layer's entry for catalog won.
	for _, want := range []string{
		"config layers: home/.mcp.json, project/.mcp.json, project/.mcp.local.json",
		"  catalog  from project/.mcp.local.json (local layer)",
		"  demo     from project/.mcp.json (project layer)",
		"  notes    from home/.mcp.json (user layer)",
		"SetServers: added [catalog demo notes], settled true",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("no line %q", want)
		}
	}

	// The tool list: built-ins first, then the MCP tools as the config's
	// filters leave them (-tools 2 is the local layer's).
	var tools []string
	for i := slices.Index(lines, "tools for the model:") + 1; i > 0 && i < len(lines); i++ {
		name, ok := strings.CutPrefix(lines[i], `  {"name":"`)
		if !ok {
			if strings.HasPrefix(lines[i], "  event ") {
				continue
			}
			break
		}
		tools = append(tools, name[:strings.IndexByte(name, '"')])
	}
	wantTools := []string{"Clock", "Read",
		"mcp__catalog__add", "mcp__catalog__echo", "mcp__catalog__fail", "mcp__catalog__tool_001", "mcp__catalog__tool_002",
		"mcp__demo__add", "mcp__demo__announce", "mcp__demo__echo", "mcp__demo__fail", "mcp__demo__sleep",
		"mcp__notes__echo"}
	if !slices.Equal(tools, wantTools) {
		t.Errorf("tools for the model:\n got %v\nwant %v", tools, wantTools)
	}

	// Each scripted call and its outcome (the line after it, events aside).
	type outcome struct{ call, result string }
	var calls []outcome
	for i, l := range lines {
		if !strings.HasPrefix(l, "call ") {
			continue
		}
		o := outcome{call: strings.TrimPrefix(l, "call ")}
		for _, r := range lines[i+1:] {
			if !strings.HasPrefix(r, "  event ") {
				o.result = strings.TrimPrefix(r, "  ")
				break
			}
		}
		calls = append(calls, o)
	}
	want := []outcome{
		{`Clock {}`, "ok: 20"}, // the year
		{`Read {"path": "TODO.md"}`, "ok: - ship the agent host"},
		{`Read {"path": "../../../go.mod"}`, "tool error: "},
		{`mcp__demo__add {"a": 2, "b": 40}`, "ok: 42"},
		{`mcp__demo__fail {}`, "tool error: this tool always fails"},
		{`mcp__catalog__announce {}`, `error: mcpvisor: unknown tool: "mcp__catalog__announce"`},
		{`mcp__demo__announce {"text": "tool_late"}`, "ok: announced tool_late"},
		{`mcp__demo__tool_late {"text": "new on this turn"}`, "ok: new on this turn"},
		{`mcp__catalog__echo {"text": "anyone?"}`, "error: mcpvisor: server toggled off"},
		{`mcp__catalog__echo {"text": "back"}`, "ok: back"},
	}
	if len(calls) != len(want) {
		t.Fatalf("%d calls, want %d: %q", len(calls), len(want), calls)
	}
	for i, w := range want {
		if calls[i].call != w.call || !strings.HasPrefix(calls[i].result, w.result) {
			t.Errorf("call %d: %s → %s; want %s → %s…", i, calls[i].call, calls[i].result, w.call, w.result)
		}
	}

	// The events: the announced tool's diff, before the call that uses it
	// (nextTurn waits for the event loop); the toggle's.
	for _, want := range []string{
		"  event tools_changed demo: +mcp__demo__tool_late",
		"  event server_toggled catalog: off=true",
		"  event tools_changed catalog: -mcp__catalog__add -mcp__catalog__echo -mcp__catalog__fail -mcp__catalog__tool_001 -mcp__catalog__tool_002",
		"  event server_toggled catalog: off=false",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("no line %q", want)
		}
	}
	if a, b := slices.Index(lines, "  event tools_changed demo: +mcp__demo__tool_late"),
		slices.Index(lines, `call mcp__demo__tool_late {"text": "new on this turn"}`); a > b {
		t.Errorf("the tool_late call (line %d) came before its event (line %d)", b, a)
	}
	if lines[len(lines)-1] != "closed" {
		t.Errorf("last line %q, want closed", lines[len(lines)-1])
	}
}

func TestRunBadDir(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), &out, []string{"-dir", "no-such-dir"})
	if err == nil || !strings.Contains(err.Error(), "pass -dir") {
		t.Errorf("run: %v, want an error saying to pass -dir", err)
	}
	if out.Len() > 0 {
		t.Errorf("output %q, want none", out.String())
	}
}

// Another project than the bundled one is not approved: its servers are
// held, shown, and never started.
func TestRunHoldsAnotherProjectsServers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	other := t.TempDir()
	for _, name := range []string{".mcp.json", ".mcp.local.json"} {
		b, err := os.ReadFile(filepath.Join("project", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(other, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := run(ctx, &out, []string{"-dir", other, "-home", "home", "-log", "error"}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"  demo     held: ", "  catalog  held: ", "demo     needs-approval"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}
