package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	search "github.com/mcpvisor/mcpvisor/bench/search"
)

func TestMain(m *testing.M) {
	if mockserver.IsRequested() {
		os.Exit(mockserver.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func mockSpec(name string, args ...string) spec {
	c := mockserver.Command(args...)
	return spec{Name: name, Package: "mock", Version: "1", Command: c.Command, Args: c.Args, Env: c.Env}
}

// A capture follows nextCursor to the last page, skips non-JSON lines on
// stdout, and writes a file the benchmark's loader accepts.
func TestCaptureFollowsPagesAndLoads(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := captureToFile(ctx, mockSpec("mock", "-name", "paged", "-tools", "25", "-page-size", "7", "-garbage"), dir)
	if err != nil {
		t.Fatalf("capture: %v", err)
	}
	servers, err := search.LoadCorpus(dir)
	if err != nil {
		t.Fatalf("LoadCorpus: %v", err)
	}
	if len(servers) != 1 || servers[0].Name != "mock" || servers[0].Package != "mock@1" || servers[0].ServerInfo.Name != "paged" {
		t.Fatalf("loaded %+v", servers)
	}
	// 25 extra tools besides the mock's standard ones, over several pages.
	if n := len(servers[0].Tools); n < 26 || n != len(c.Tools) {
		t.Errorf("%d tools loaded (%d captured), want every page's", n, len(c.Tools))
	}
	last := false
	for _, tl := range servers[0].Tools {
		last = last || tl.Name == "tool_025"
	}
	if !last {
		t.Error("tool_025 (on the last page) missing")
	}
}

// A server that exits before answering is an error, not a hang.
func TestCaptureServerExits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := captureOne(ctx, mockSpec("gone", "-exit-at-start")); err == nil || ctx.Err() != nil {
		t.Fatalf("capture of an exiting server: err %v, ctx %v; want an error before the deadline", err, ctx.Err())
	}
}
