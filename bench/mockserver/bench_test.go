package mockserver

import (
	"bufio"
	"context"
	"io"
	"testing"
)

// BenchmarkStdioCall measures the server's side of one tools/call over
// stdio: decode, dispatch, encode, write.
func BenchmarkStdioCall(b *testing.B) {
	s := newServer(Options{})
	out := &stdioConn{out: bufio.NewWriterSize(io.Discard, 64<<10)}
	p := &peer{conn: out}
	p.initialized.Store(true)
	s.hub.add(out)
	line := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}` + "\n")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s.handle(ctx, p, line, out)
	}
}
