package peers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/peers/harness"
)

// mockBin is the mock server binary every client spawns, built once by
// TestMain.
var mockBin string

func TestMain(m *testing.M) {
	mcpvisor.HelperMain()
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "peers-mockserver-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Built without -race even under `go test -race`: the server must stay
	// lean so that the benchmarks measure the clients.
	bins, err := harness.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers: building the mock server:", err)
		return 1
	}
	mockBin = bins.Mock
	code := m.Run()
	if orphans := waitNoMockProcesses(2 * time.Second); len(orphans) > 0 {
		fmt.Fprintf(os.Stderr, "peers: mock server processes left running: %v (killed)\n", orphans)
		for _, pid := range orphans {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if code == 0 {
			code = 1
		}
	}
	return code
}

// mockProcesses returns the pids of live processes running mockBin.
func mockProcesses() []int { return mockProcessesAbove(0) }

// mockProcessesAbove returns the pids above minPid of live processes
// running mockBin. (Reading every process's exe link is what costs; pids
// grow, so a caller that knows the last mock pid can skip the older ones.)
func mockProcessesAbove(minPid int) []int {
	if runtime.GOOS != "linux" {
		return nil
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= minPid {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == mockBin {
			pids = append(pids, pid)
		}
	}
	return pids
}

func waitNoMockProcesses(grace time.Duration) []int {
	deadline := time.Now().Add(grace)
	for {
		pids := mockProcesses()
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const (
	warmupCalls = 200
	inFlight    = 32
)

// forEachPeer runs f as sub-benchmark client=<name>/era=<era> for every
// client and era.
func forEachPeer(b *testing.B, f func(b *testing.B, p harness.Peer, era string)) {
	for _, p := range harness.Peers {
		for _, era := range harness.Eras {
			b.Run("client="+p.Name+"/era="+era, func(b *testing.B) { f(b, p, era) })
		}
	}
}

// cpuTime is the CPU (user+system) this process — the client; the server
// is a separate process — has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkConnect measures one whole connection per iteration: spawn the
// server, negotiate the era, list the tools, close (stdin EOF, wait for
// the process to exit). mcpvisor's includes starting and closing a
// Supervisor around the server.
func BenchmarkConnect(b *testing.B) {
	forEachPeer(b, func(b *testing.B, p harness.Peer, era string) {
		b.ReportAllocs()
		ctx := context.Background()
		cpu0 := cpuTime(b)
		for i := 0; i < b.N; i++ {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			s, err := p.Connect(cctx, harness.Command{Path: mockBin}, era)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
		cpu := cpuTime(b) - cpu0
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
	})
}

// BenchmarkCallSequential measures b.N sequential tools/call of echo on
// one session.
func BenchmarkCallSequential(b *testing.B) {
	forEachPeer(b, func(b *testing.B, p harness.Peer, era string) {
		benchCalls(b, era, 1, func(ctx context.Context) (harness.Session, error) {
			return p.Connect(ctx, harness.Command{Path: mockBin}, era)
		})
	})
}

// BenchmarkCallConcurrent32 measures b.N tools/call of echo on one
// session with 32 calls in flight (a pool of 32 goroutines).
func BenchmarkCallConcurrent32(b *testing.B) {
	forEachPeer(b, func(b *testing.B, p harness.Peer, era string) {
		benchCalls(b, era, inFlight, func(ctx context.Context) (harness.Session, error) {
			return p.Connect(ctx, harness.Command{Path: mockBin}, era)
		})
	})
}

// benchCalls opens a session with connect, checks that it speaks era,
// warms it up and measures b.N echo calls with workers calls in flight,
// reporting calls/s and the client's CPU per call.
func benchCalls(b *testing.B, era string, workers int, connect func(context.Context) (harness.Session, error)) {
	ctx := context.Background()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	s, err := connect(cctx)
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			b.Error("close:", err)
		}
	}()
	if got := s.Version(); got != harness.WantVersion[era] {
		b.Fatalf("negotiated %q, want %q", got, harness.WantVersion[era])
	}
	if err := runCalls(ctx, s, warmupCalls, workers); err != nil {
		b.Fatal("warm-up:", err)
	}

	b.ReportAllocs()
	runtime.GC()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	err = runCalls(ctx, s, b.N, workers)
	cpu := cpuTime(b) - cpu0
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-us/call")
}

// runCalls makes n echo calls on s with workers calls in flight and
// returns the first error.
func runCalls(ctx context.Context, s harness.Session, n, workers int) error {
	if workers <= 1 {
		for range n {
			if err := checkEcho(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		next     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := checkEcho(ctx, s); err != nil {
					once.Do(func() { firstErr = err })
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait() // testwait:ok a benchmark's helper: each call has ctx's deadline
	return firstErr
}

func checkEcho(ctx context.Context, s harness.Session) error {
	text, err := s.Echo(ctx)
	if err != nil {
		return err
	}
	if text != harness.EchoText {
		return fmt.Errorf("echo returned %q, want %q", text, harness.EchoText)
	}
	return nil
}
