package mockserver

import (
	"bufio"
	"context"
	"io"
	"testing"
)

// Requests as mcpvisor's client sends them, per era.
const (
	benchCallHandshake = `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"0123456789abcdef"}}}`
	benchCallModern    = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcpvisor","version":"0.1.0"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"echo","arguments":{"text":"0123456789abcdef"}}}`
)

// BenchmarkStdioCall measures the server's side of one tools/call over
// stdio: decode, dispatch, encode, write.
func BenchmarkStdioCall(b *testing.B) {
	for _, bc := range []struct{ name, line string }{
		{"2025-11-25", benchCallHandshake},
		{"2026-07-28", benchCallModern},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := newServer(Options{})
			out := &stdioConn{out: bufio.NewWriterSize(io.Discard, 64<<10)}
			p := &peer{conn: out}
			p.initialized.Store(true)
			s.hub.add(out)
			line := []byte(bc.line + "\n")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				s.handle(ctx, p, line, out)
			}
		})
	}
}
