package sandbox

import (
	"encoding/json"
	"testing"

	"github.com/mcpvisor/mcpvisor/transports"
)

// BenchmarkPrepare measures what the host does per confined start before
// the exec stage: choose the mechanism, list the rules, make the private
// temporary directory.
func BenchmarkPrepare(b *testing.B) {
	for _, m := range []transports.SandboxMechanism{transports.SandboxLandlock, transports.SandboxBwrap} {
		b.Run(string(m), func(b *testing.B) {
			cfg := &transports.Sandbox{Enabled: true, Mechanism: m}
			cmd := Command{Path: "/bin/cat", Argv: []string{"cat"}, Dir: "/tmp"}
			var size int
			for b.Loop() {
				p, err := Prepare(cfg, cmd, Options{})
				if err != nil {
					b.Fatal(err)
				}
				js, _ := json.Marshal(p)
				size = len(js)
				p.Cleanup()
			}
			b.ReportMetric(float64(size), "plan-bytes")
		})
	}
}
