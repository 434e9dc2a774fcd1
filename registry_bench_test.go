package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/actors/admission"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

// BenchmarkFanOut measures the event bus's fan-out: each op has one
// server announce a new tool (the mock's announce tool adds it and sends
// notifications/tools/list_changed), the supervisor re-lists the
// server's tools, and the registry publishes one tools_changed event to
// every subscriber. N subscribers each drain their channel in a goroutine
// of their own.
//
//   - delivery: from the event's Time (stamped when the registry
//     publishes it) to its receipt by a subscriber, for every subscriber
//     and every op, as p50 and p99 in microseconds;
//   - drops: the events the subscribers lost (the sum of the gap events'
//     Dropped), which should be none: the ops come one at a time and every
//     subscriber reads as fast as it can;
//   - ns/op: from the announce call until every subscriber has the event.
//
// The benchmark reads one more subscription itself, to learn each op's
// event (its Seq). A server's tool list grows by one tool per op, so
// every fanOutOpsPerServer ops the server is replaced by a new one (timer
// stopped), to keep the re-list the same size throughout.
func BenchmarkFanOut(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) { benchFanOut(b, n) })
	}
}

// fanOutBuffer is each subscription's buffer.
const fanOutBuffer = 256

// fanOutOpsPerServer is how many tools a server announces before it is
// replaced.
const fanOutOpsPerServer = 100

// fanOutReceipt is one subscriber's receipt of a tools_changed event.
type fanOutReceipt struct {
	seq     uint64
	latency time.Duration // from the event's Time to its receipt
}

func benchFanOut(b *testing.B, n int) {
	s := startForBench(b, testOptions)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	probe := s.reg.subscribeRecords(ctx, false, 0, fanOutBuffer)
	// Every subscriber sends a receipt of each tools_changed event; the
	// benchmark counts the receipts of each op's event.
	receipts := make(chan fanOutReceipt, 4*n)
	drops := make([]uint64, n) // drops[i] is written by subscriber i until it ends
	var subscribers sync.WaitGroup
	for i := range n {
		events := s.reg.subscribeRecords(ctx, false, 0, fanOutBuffer)
		subscribers.Go(func() {
			for ev := range events {
				received := time.Now()
				switch ev.Type {
				case EventGap:
					drops[i] += ev.Dropped
				case EventToolsChanged:
					select {
					case receipts <- fanOutReceipt{seq: ev.Seq, latency: received.Sub(ev.Time)}:
					case <-ctx.Done():
						return
					}
				}
			}
		})
	}

	var server string
	var lastSeq uint64 // the latest event the probe has seen
	replace := func(gen int) {
		server = fmt.Sprintf("dyn-%d", gen)
		// A new name, not a changed config: a fresh process, a tool list
		// that starts over, and a WaitSettled that waits for it.
		settleForBench(b, s, map[string]ServerConfig{server: mock()})
		for drained := false; !drained; {
			select {
			case ev := <-probe:
				lastSeq = max(lastSeq, ev.Seq)
			default:
				drained = true
			}
		}
	}
	replace(0)

	var latencies []time.Duration
	b.ResetTimer()
	for op := range b.N {
		if op > 0 && op%fanOutOpsPerServer == 0 {
			b.StopTimer()
			replace(op / fanOutOpsPerServer)
			b.StartTimer()
		}
		args, _ := json.Marshal(map[string]string{"text": fmt.Sprintf("tool_%d", op)})
		_, err := s.CallTool(ctx, QualifiedName(server, "announce"), args)
		require.NoError(b, err)
		seq := awaitToolsChanged(b, probe, server, lastSeq)
		lastSeq = seq
		timeout := time.After(recoveryWait)
		for got := 0; got < n; {
			select {
			case r := <-receipts:
				if r.seq == seq {
					got++
					latencies = append(latencies, r.latency)
				} // else: a replaced server's first tools_changed
			case <-timeout:
				b.Fatalf("op %d: only %d of %d subscribers got event %d within %v (a subscriber that lost it never will)", op, got, n, seq, recoveryWait)
			}
		}
	}
	b.StopTimer()
	cancel()
	subscribers.Wait()

	var dropped uint64
	for _, d := range drops {
		dropped += d
	}
	slices.Sort(latencies)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(nearestRank(latencies, 50)), "delivery-p50-us")
	b.ReportMetric(us(nearestRank(latencies, 99)), "delivery-p99-us")
	b.ReportMetric(float64(dropped), "drops")
}

// awaitToolsChanged reads probe until the tools_changed event of server
// after sequence number after, and returns its Seq.
func awaitToolsChanged(b *testing.B, probe <-chan eventRecord, server string, after uint64) uint64 {
	b.Helper()
	timeout := time.After(recoveryWait)
	for {
		select {
		case ev, ok := <-probe:
			if !ok {
				b.Fatal("the probe subscription ended")
			}
			if ev.Type == EventGap {
				b.Fatalf("the probe lost %d events", ev.Dropped)
			}
			if ev.Type == EventToolsChanged && ev.Server == server && ev.Seq > after {
				return ev.Seq
			}
		case <-timeout:
			b.Fatalf("no tools_changed from %s within %v", server, recoveryWait)
		}
	}
}

// nearestRank returns the p-th percentile of sorted (nearest rank).
func nearestRank(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (p*len(sorted)+99)/100 - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// BenchmarkConnectStdio measures the connect of many stdio servers at
// once through the connect scheduler: each op starts a supervisor
// (untimed), gives it servers mock servers and times SetServers until
// WaitSettled, with every server ready; then closes the supervisor
// (untimed). The pool is LocalConnectLimit.
//
// The spawn-only sub-benchmark is the floor for comparison: the same
// number of processes of the same binary, pool at a time, each doing
// nothing but start (exec and the Go runtime's start, race detector
// included when the benchmark runs with -race) and exit at once
// (-exit-at-start). The supervised sub-benchmark reports its time as a
// multiple of that floor (x-spawn-only) when both ran.
//
// servers=1000 runs only with MCPVISOR_BENCH_LARGE=1: a thousand live
// processes of the test binary, each with about 2 MB of private memory,
// or 17 MB with -race (17 GB in all: mind the machine).
func BenchmarkConnectStdio(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) {
			if n > 100 && os.Getenv("MCPVISOR_BENCH_LARGE") != "1" {
				b.Skipf("%d servers: set MCPVISOR_BENCH_LARGE=1 to run it (a thousand live processes)", n)
			}
			for _, pool := range []int{3, 16, 64} {
				b.Run(fmt.Sprintf("pool=%d", pool), func(b *testing.B) {
					var floor time.Duration // spawn-only, per op
					b.Run("spawn-only", func(b *testing.B) {
						for range b.N {
							spawnOnly(b, n, pool)
						}
						floor = b.Elapsed() / time.Duration(b.N)
						reportMs(b)
					})
					b.Run("supervised", func(b *testing.B) {
						b.StopTimer()
						for range b.N {
							connectStdio(b, n, pool)
						}
						per := b.Elapsed() / time.Duration(b.N)
						reportMs(b)
						if floor > 0 {
							b.ReportMetric(float64(per)/float64(floor), "x-spawn-only")
						}
					})
				})
			}
		})
	}
}

// reportMs reports the time per op in milliseconds.
func reportMs(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(time.Millisecond), "ms/op")
}

// connectStdio is one op of the supervised benchmark; it runs with the
// timer stopped and times SetServers to WaitSettled.
func connectStdio(b *testing.B, n, pool int) {
	opts := testOptions
	opts.LocalConnectLimit = pool
	s, err := Start(context.Background(), opts)
	require.NoError(b, err)
	servers := make(map[string]ServerConfig, n)
	for i := range n {
		servers[fmt.Sprintf("s%04d", i)] = mock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	b.StartTimer()
	_, err = s.SetServers(ctx, servers)
	if err == nil {
		err = s.WaitSettled(ctx)
	}
	b.StopTimer()

	require.NoError(b, err)
	sts := s.Status()
	require.Len(b, sts, n)
	for _, st := range sts {
		require.Equal(b, StateReady, st.State, "%s: %s", st.Name, st.LastError)
	}
	stats, err := s.reg.admissionStats(ctx)
	require.NoError(b, err)
	require.LessOrEqual(b, stats.Peak[admission.Local], pool)

	pids := serverPids(s)
	require.NoError(b, s.Close(ctx))
	for _, pid := range pids {
		require.Empty(b, stdiotest.WaitGroupGone(pid, 3*time.Second), "process group %d must be gone after Close", pid)
	}
}

// spawnOnly starts n processes of the mock server's binary, pool at a
// time, each exiting at once, and waits for them all.
func spawnOnly(b *testing.B, n, pool int) {
	cfg := mockserver.Command("-exit-at-start")
	env := os.Environ()
	for k, v := range cfg.Env {
		env = append(env, k+"="+v)
	}
	slots := make(chan struct{}, pool)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			cmd := exec.Command(cfg.Command, cfg.Args...)
			cmd.Env = env
			err := cmd.Run()
			var exit *exec.ExitError
			if errors.As(err, &exit) && exit.ExitCode() == 4 {
				err = nil // -exit-at-start's code
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
}
