package reaper

import (
	"context"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
)

// BenchmarkSpawn measures one server's start through the helper, from
// Spawn to the server running, then its exit and release: unconfined,
// and through the exec stage with each mechanism's plan. The server is
// /bin/true.
func BenchmarkSpawn(b *testing.B) {
	for _, m := range []transports.SandboxMechanism{"", transports.SandboxLandlock, transports.SandboxBwrap} {
		name := string(m)
		if name == "" {
			name = "unconfined"
		}
		b.Run(name, func(b *testing.B) {
			release := Hold()
			defer release()
			var startTotal time.Duration
			for b.Loop() {
				req := devNullB(b)
				req.Path, req.Argv = "/bin/true", []string{"true"}
				var plan *sandbox.Plan
				if m != "" {
					var err error
					plan, err = sandbox.Prepare(&transports.Sandbox{Enabled: true, Mechanism: m},
						sandbox.Command{Path: req.Path, Argv: req.Argv, Dir: "/"}, sandbox.Options{})
					if err != nil {
						b.Skip(err)
					}
					req.Confine = plan
				}
				t0 := time.Now()
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
			b.ReportMetric(float64(startTotal.Microseconds())/float64(b.N), "start-µs")
		})
	}
}
