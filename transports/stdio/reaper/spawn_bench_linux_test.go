package reaper

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox/sandboxtest"
)

// BenchmarkSpawn measures one server's start through the helper, from
// Prepare and Spawn to the server running, then its exit and release:
// unconfined, and confined by each mechanism, through util-linux's
// prlimit (the default where installed) and through the exec stage. The
// server is /bin/true, or a Go program (the sandbox probe, which exits at
// the end of its stdin, /dev/null). Besides the start's wall time
// (start-µs), it reports CPU time, steadier on a busy machine: the
// host's (host-cpu-µs: Prepare, the request) and that of the helper and
// everything below it (helper-cpu-µs: the reaper, the exec stage or
// prlimit, bubblewrap, the server), per start. Each sub-benchmark runs
// its own reaper, whose CPU is counted when it is reaped at the end.
func BenchmarkSpawn(b *testing.B) {
	probe, err := sandboxtest.Build(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	servers := []struct{ name, path string }{{"true", "/bin/true"}, {"go", probe}}
	variants := []struct {
		name      string
		mechanism transports.SandboxMechanism
		execStage bool
	}{
		{"unconfined", "", false},
		{"landlock", transports.SandboxLandlock, false},
		{"landlock-exec-stage", transports.SandboxLandlock, true},
		{"bwrap", transports.SandboxBwrap, false},
		{"bwrap-exec-stage", transports.SandboxBwrap, true},
	}
	for _, srv := range servers {
		for _, v := range variants {
			b.Run(srv.name+"/"+v.name, func(b *testing.B) {
				var self0, children0 syscall.Rusage
				syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
				syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children0)
				release := Hold()
				var startTotal time.Duration
				for b.Loop() {
					req := devNullB(b)
					req.Path, req.Argv = srv.path, []string{srv.name}
					t0 := time.Now()
					var plan *sandbox.Plan
					if v.mechanism != "" {
						var err error
						plan, err = sandbox.Prepare(&transports.Sandbox{Enabled: true, Mechanism: v.mechanism},
							sandbox.Command{Path: req.Path, Argv: req.Argv, Dir: "/"}, sandbox.Options{ExecStage: v.execStage})
						if err != nil {
							b.Fatal(err) // the code under test: a failure, not a skip
						}
						req.Confine = plan
					}
					p, err := Spawn(context.Background(), req)
					if err != nil {
						b.Fatal(err)
					}
					startTotal += time.Since(t0)
					<-p.Done()
					if _, err := p.Release(context.Background(), 100*time.Millisecond); err != nil {
						b.Fatal(err)
					}
					plan.Cleanup()
				}
				release() // the reaper ends and is reaped: its CPU, and its children's, is counted
				var self1, children1 syscall.Rusage
				syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
				syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children1)
				n := float64(b.N)
				b.ReportMetric(float64(startTotal.Microseconds())/n, "start-µs")
				b.ReportMetric(float64(cpu(self1)-cpu(self0))/n/1e3, "host-cpu-µs")
				b.ReportMetric(float64(cpu(children1)-cpu(children0))/n/1e3, "helper-cpu-µs")
			})
		}
	}
}

// cpu is the user and system time of a Rusage, in nanoseconds.
func cpu(r syscall.Rusage) int64 {
	return syscall.TimevalToNsec(r.Utime) + syscall.TimevalToNsec(r.Stime)
}
