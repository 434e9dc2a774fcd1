package peers

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"

	"github.com/mcpvisor/mcpvisor/bench/peers/harness"
)

// BenchmarkConnectReusedSupervisor is BenchmarkConnect for mcpvisor with
// one long-lived Supervisor, as in a host: each iteration adds the server
// (SetServers), waits until it is ready (spawn, negotiation, listing),
// removes it and waits for its process to exit. It separates the
// per-server connect cost from the one-time cost of starting a Supervisor
// (BenchmarkConnect's mcpvisor numbers include both).
//
// The end of the process is watched through a pidfd rather than the
// server's "stopped" event: for a removed server that event is not
// delivered (see README.md). Finding the pid reads /proc/<pid>/exe of the
// pids handed out since the previous iteration's server.
func BenchmarkConnectReusedSupervisor(b *testing.B) {
	for _, era := range harness.Eras {
		b.Run("client=mcpvisor/era="+era, func(b *testing.B) {
			ctx := context.Background()
			sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				if err := sup.Close(cctx); err != nil {
					b.Error("close:", err)
				}
			}()
			servers := map[string]mcpvisor.ServerConfig{"m": {
				Config:          transports.Config{Command: mockBin},
				ProtocolVersion: harness.Pinned(era),
			}}
			none := map[string]mcpvisor.ServerConfig{}
			lastPid := 0
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			for i := 0; i < b.N; i++ {
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				if _, err := sup.SetServers(cctx, servers); err != nil {
					b.Fatal(err)
				}
				if err := sup.WaitSettled(cctx); err != nil {
					b.Fatal(err)
				}
				if st := sup.Status(); len(st) != 1 || st[0].State != mcpvisor.StateReady {
					b.Fatalf("server not ready: %+v", st)
				}
				pidfd, err := openMockPidfd(&lastPid)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := sup.SetServers(cctx, none); err != nil {
					b.Fatal(err)
				}
				err = waitPidfd(pidfd, 30*time.Second)
				unix.Close(pidfd)
				if err != nil {
					b.Fatal(err)
				}
				cancel()
			}
			cpu := cpuTime(b) - cpu0
			b.StopTimer()
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}

// openMockPidfd returns a pidfd of the one running mock server process
// and records its pid in *last. Pids are handed out in increasing order,
// so it first probes the few pids after *last (cheap: reading all of /proc
// costs ~100 µs of CPU here, more than the difference being measured),
// then falls back to scanning /proc.
func openMockPidfd(last *int) (int, error) {
	pid := 0
	if *last > 0 {
		for p := *last + 1; p <= *last+256; p++ {
			if exe, err := os.Readlink("/proc/" + strconv.Itoa(p) + "/exe"); err == nil && exe == mockBin {
				pid = p
				break
			}
		}
	}
	if pid == 0 {
		pids := mockProcesses()
		if len(pids) != 1 {
			return -1, fmt.Errorf("want one mock server process, found %v", pids)
		}
		pid = pids[0]
	}
	*last = pid
	return unix.PidfdOpen(pid, 0)
}

// waitPidfd waits until the process of pidfd has exited.
func waitPidfd(pidfd int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case n == 0:
			return fmt.Errorf("mock server still running after %v", timeout)
		}
		return nil
	}
}
