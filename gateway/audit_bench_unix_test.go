//go:build unix

package gateway_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor/audit"
	"github.com/mcpvisor/mcpvisor/gateway"
)

// BenchmarkGatewayAuditCPU measures the process CPU (user + system, all
// goroutines: the writer's too) per tools/call served in process by the
// gateway's HTTP handler over a backend that answers at once, with the
// audit trail off, on (to a file, synced every second), and on with the
// arguments kept (redacted). Reports cpu-µs/op; compare the sub-benchmarks
// side by side.
func BenchmarkGatewayAuditCPU(b *testing.B) {
	for _, c := range []struct {
		name string
		o    *audit.Options
	}{
		{"off", nil},
		{"on", &audit.Options{}},
		{"on-arguments", &audit.Options{Arguments: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var opts gateway.Options
			var w *audit.Writer
			if c.o != nil {
				c.o.Path = filepath.Join(b.TempDir(), "audit.log")
				c.o.Queue = 1 << 16
				var err error
				if w, err = audit.New(*c.o); err != nil {
					b.Fatal(err)
				}
				opts.Audit = w
			}
			g, _ := serve(b, stubBackend{}, opts)
			h := g.Handler()
			init := httptest.NewRequest(http.MethodPost, gateway.MCPPath, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`))
			init.Header.Set("Accept", "application/json, text/event-stream")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, init)
			sid := rec.Header().Get("Mcp-Session-Id")
			body := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__m__echo","arguments":{"text":"0123456789abcdef","api_key":"k-0123456789"}}}`)
			start := cpuTime()
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, gateway.MCPPath, bytes.NewReader(body))
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Session-Id", sid)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Code, rec.Body.String())
				}
			}
			if w != nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				if err := w.Close(ctx); err != nil {
					b.Fatal(err)
				}
				cancel()
				if st := w.Stats(); st.Dropped > 0 {
					b.ReportMetric(float64(st.Dropped), "dropped")
				}
			}
			b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
