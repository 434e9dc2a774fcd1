package peers

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/peers/harness"
	"github.com/mcpvisor/mcpvisor/transports"
)

// TestIdleHeapProfile writes heap profiles of a Supervisor holding N idle
// servers (MCPVISOR_IDLE_PROFILE=dir; MCPVISOR_IDLE_N, default 1000):
// <dir>/<transport>-base.pprof once the Supervisor has started and
// <dir>/<transport>-idle.pprof once every server is ready and idle, every
// allocation sampled (runtime.MemProfileRate = 1), and the idle state's
// goroutines in <dir>/<transport>-goroutines.txt; it logs the heap, stack
// and goroutines per server, as the bench runner measures them. Compare
// the profiles with
// `go tool pprof -sample_index=inuse_space -base base.pprof idle.pprof`.
// Transports: stdio (era modern, pool 3) and HTTP (2025-11-25, pool 20),
// as in the connect scenario. A profiling aid, skipped unless the
// variable is set.
func TestIdleHeapProfile(t *testing.T) {
	dir := os.Getenv("MCPVISOR_IDLE_PROFILE")
	if dir == "" {
		t.Skip("set MCPVISOR_IDLE_PROFILE=dir to write idle heap profiles")
	}
	n := 1000
	if s := os.Getenv("MCPVISOR_IDLE_N"); s != "" {
		v, err := strconv.Atoi(s)
		must(t, err)
		n = v
	}
	must(t, os.MkdirAll(dir, 0o755))
	runtime.MemProfileRate = 1
	for _, tc := range []struct {
		name string
		cfg  func() transports.Config
		era  string
		pool int
	}{
		{harness.TransportStdio, func() transports.Config { return transports.Config{Command: mockBin} }, harness.ConnectEraStdio, 3},
		{harness.TransportHTTP, func() transports.Config {
			return transports.Config{Type: transports.TypeHTTP, URL: startHTTPMock(t).URL}
		}, harness.ConnectEraHTTP, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			sup, err := mcpvisor.Start(ctx, mcpvisor.Options{LocalConnectLimit: tc.pool, RemoteConnectLimit: tc.pool})
			must(t, err)
			defer func() { must(t, sup.Close(context.Background())) }()
			before := snapshot()
			writeHeap(t, filepath.Join(dir, tc.name+"-base.pprof"))
			servers := make(map[string]mcpvisor.ServerConfig, n)
			for i := range n {
				servers[serverName(i)] = mcpvisor.ServerConfig{Config: cfg, ProtocolVersion: harness.Pinned(tc.era)}
			}
			res, err := sup.SetServers(ctx, servers)
			must(t, err)
			if len(res.Errors) > 0 {
				t.Fatalf("SetServers: %v", res.Errors)
			}
			must(t, sup.WaitSettled(ctx))
			after := snapshot()
			writeHeap(t, filepath.Join(dir, tc.name+"-idle.pprof"))
			g, err := os.Create(filepath.Join(dir, tc.name+"-goroutines.txt"))
			must(t, err)
			must(t, pprof.Lookup("goroutine").WriteTo(g, 1))
			must(t, g.Close())
			d := after.since(before)
			t.Logf("%s N=%d: heap %.0f B/server, stack %.0f B/server, %.2f goroutines/server",
				tc.name, n, float64(d.heapAlloc)/float64(n), float64(d.stack)/float64(n), float64(d.goroutines)/float64(n))
		})
	}
}

func serverName(i int) string { return "s" + strconv.Itoa(10000 + i)[1:] }

func writeHeap(t *testing.T, path string) {
	t.Helper()
	runtime.GC()
	f, err := os.Create(path)
	must(t, err)
	defer f.Close()
	must(t, pprof.Lookup("heap").WriteTo(f, 0))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
