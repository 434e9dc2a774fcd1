package gosdkclient

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startupConfig writes a config whose servers "slow" and "old" take 3 s
// to start (in two eras), beside "fast", a lazy server that would take a
// minute and a disabled one.
func startupConfig(t *testing.T) (string, []string) {
	t.Helper()
	mock := func(args ...string) map[string]any {
		return map[string]any{"command": bin, "args": append([]string{"mock"}, args...)}
	}
	lazy := mock("-name", "lazy", "-init-delay", "1m")
	lazy["lazy"] = true
	off := mock("-name", "off")
	off["disabled"] = true
	cfg := map[string]any{"mcpServers": map[string]any{
		"fast": mock("-name", "fast"),
		"slow": mock("-name", "slow", "-init-delay", "3s"),
		"old":  mock("-name", "old", "-init-delay", "3s", "-versions", "2025-06-18"),
		"lazy": lazy,
		"off":  off,
	}}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, []string{"fast", "slow", "old"}
}

// atStartUp does what an agent host does as it starts: connect, list the
// tools once (no retry), call a tool of every server.
func atStartUp(t *testing.T, connect func(context.Context, *mcp.Client) (*mcp.ClientSession, error), servers []string, t0 time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "gosdk-startup", Version: "1"}, nil)
	cs, err := connect(ctx, client)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	t.Logf("first tools/list complete %v after the gateway started (%d tools)", time.Since(t0).Round(time.Millisecond), len(res.Tools))
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	// The gateway's names are <server>__<tool> (a host adds its own
	// prefix).
	for _, s := range servers {
		if !slices.Contains(names, s+"__echo") {
			t.Errorf("the first tools/list lacks %s__echo: %v", s, names)
		}
	}
	for _, s := range servers {
		out, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: s + "__echo", Arguments: map[string]any{"text": "hello " + s}})
		if err != nil {
			t.Errorf("tools/call %s__echo: %v", s, err)
			continue
		}
		if out.IsError || len(out.Content) != 1 || out.Content[0].(*mcp.TextContent).Text != "hello "+s {
			t.Errorf("%s__echo answered %+v", s, out)
		}
	}
}

// The official Go SDK client lists once right after the gateway starts
// (over stdio it starts `supervise --stdio` itself; over HTTP it connects
// the moment the port answers) and gets every server that takes 3 s to
// start, and calls each.
func TestGoSDKClientAtStartUp(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		cfg, servers := startupConfig(t)
		t0 := time.Now()
		atStartUp(t, func(ctx context.Context, c *mcp.Client) (*mcp.ClientSession, error) {
			cmd := exec.Command(bin, "supervise", "--stdio", "--config", cfg, "--state-dir", t.TempDir())
			cmd.Stderr = io.Discard
			return c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		}, servers, t0)
	})
	t.Run("http", func(t *testing.T) {
		cfg, servers := startupConfig(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		t0 := time.Now()
		cmd := exec.Command(bin, "supervise", "--config", cfg, "--listen", addr, "--state-dir", t.TempDir())
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
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
		atStartUp(t, func(ctx context.Context, c *mcp.Client) (*mcp.ClientSession, error) {
			// Connect the moment the port answers.
			for {
				cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", MaxRetries: -1}, nil)
				if err == nil || ctx.Err() != nil {
					return cs, err
				}
				time.Sleep(5 * time.Millisecond) // testwait:ok the port is not open yet; bounded by ctx
			}
		}, servers, t0)
	})
}
