//go:build unix

package audit_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor/audit"
)

// BenchmarkWriter measures what one entry costs the process, Record and
// the writer's goroutine (encode, hash, tag, redact, write) together:
// cpu-µs/op is the process's CPU time over the entries recorded, all of
// them written (the loop waits for the writer rather than have any
// dropped).
func BenchmarkWriter(b *testing.B) {
	args := json.RawMessage(`{"text":"0123456789abcdef","api_key":"k-0123456789"}`)
	for _, c := range []struct {
		name string
		o    audit.Options
	}{
		{"file", audit.Options{}},
		{"file-arguments", audit.Options{Arguments: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			o := c.o
			o.Path = filepath.Join(b.TempDir(), "audit.log")
			o.Queue = 1 << 14
			w, err := audit.New(o)
			if err != nil {
				b.Fatal(err)
			}
			e := audit.Entry{Action: audit.ActionToolsCall, Subject: "alice", SessionID: "0123456789abcdef0123456789abcdef", Server: "m",
				Tool: "mcp__m__echo", Outcome: audit.OutcomeOK, Duration: 42 * time.Microsecond, RequestID: json.RawMessage(`2`), Arguments: args}
			start := cpuTime()
			b.ReportAllocs()
			n := uint64(0)
			for b.Loop() {
				w.Record(e)
				// Keep the queue from filling: wait (asleep) for the
				// writer when it is half full.
				if n++; n%1024 == 0 {
					for n-w.Stats().Lines > 1<<13 {
						time.Sleep(100 * time.Microsecond) // testwait:ok a benchmark pacing itself, not a test wait
					}
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
			if st := w.Stats(); st.Dropped > 0 {
				b.Fatalf("%d dropped", st.Dropped)
			}
			b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
