// Package gosdkclient proves that the official Go SDK's client works
// against `mcpvisor supervise` (the gateway) over Streamable HTTP and
// stdio, in the 2026-07-28 era (server/discover, subscriptions/listen) and
// the handshake era: it lists and calls the tools of servers behind the
// gateway and sees a tool added behind it as tools/list_changed.
//
// It is its own module so that the root module does not depend on the SDK.
package gosdkclient

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var bin string // the mcpvisor binary

// stateDir keeps the binary's approvals and tool pins away from the
// user's own.
var stateDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gosdkclient")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "mcpvisor")
	stateDir = filepath.Join(dir, "state")
	build := exec.Command("go", "build", "-o", bin, "./cmd/mcpvisor")
	build.Dir = "../.."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func config(t *testing.T) string {
	t.Helper()
	// a is marked trusted: the tool a test adds through it is offered at
	// once (a server not marked trusted has a new tool withheld until the
	// user approves it).
	cfg := map[string]any{"mcpServers": map[string]any{
		"a": map[string]any{"command": bin, "args": []string{"mock", "-name", "a"}, "trust": "trusted"},
		"b": map[string]any{"command": bin, "args": []string{"mock", "-name", "b", "-versions", "2025-06-18"}},
	}}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startGateway runs `mcpvisor supervise` on an ephemeral port and returns
// the MCP endpoint's URL.
func startGateway(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(bin, "supervise", "--config", config(t), "--listen", "127.0.0.1:0", "--state-dir", stateDir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["message"] == "gateway listening" {
				urls <- fmt.Sprint(m["mcp"])
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Error("the gateway did not stop within 30 s")
		}
	})
	select {
	case u := <-urls:
		return u
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not start listening")
	}
	return ""
}

// exercise lists and calls tools through the gateway, then adds a tool
// behind it and waits for the list_changed.
func exercise(t *testing.T, transport func() mcp.Transport, version string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "gosdk-proof", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(ctx, transport(), &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	t.Logf("negotiated %s", cs.InitializeResult().ProtocolVersion)

	var tools []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		tools = tools[:0]
		for _, tl := range res.Tools {
			tools = append(tools, tl.Name)
		}
		if slices.Contains(tools, "a__echo") && slices.Contains(tools, "b__add") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the servers behind are still connecting
	}
	if !slices.Contains(tools, "a__echo") || !slices.Contains(tools, "b__add") {
		t.Fatalf("tools %v lack the servers' tools", tools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "b__add", Arguments: map[string]any{"a": 20, "b": 22}})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "42" {
		t.Fatalf("add answered %+v", res)
	}

	for len(changed) > 0 {
		<-changed // testwait:ok draining what is buffered: len > 0, and no other reader
	}
	name := fmt.Sprintf("late_%d", seq.Add(1))
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__announce", Arguments: map[string]any{"text": name}}); err != nil {
		t.Fatalf("announce: %v", err)
	}
	// A list_changed sent before the announce (the coalesced news of a
	// server that finished connecting) may still arrive after the drain:
	// what must hold is that a list_changed comes after which the listing
	// has the new tool.
	timeout := time.After(20 * time.Second)
	for {
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no tools/list_changed after which a__%s is listed", name)
		}
		lr, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(lr.Tools, func(tl *mcp.Tool) bool { return tl.Name == "a__"+name }) {
			return
		}
	}
}

var seq atomic.Int64

func TestStreamableHTTP(t *testing.T) {
	url := startGateway(t)
	for _, version := range []string{"", "2025-11-25", "2025-06-18"} {
		t.Run("version="+version, func(t *testing.T) {
			exercise(t, func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1} }, version)
		})
	}
}

func TestStdio(t *testing.T) {
	cfg := config(t)
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("version="+version, func(t *testing.T) {
			exercise(t, func() mcp.Transport {
				cmd := exec.Command(bin, "supervise", "--stdio", "--config", cfg, "--state-dir", stateDir)
				cmd.Stderr = io.Discard
				return &mcp.CommandTransport{Command: cmd}
			}, version)
		})
	}
}
