package mockserver

import (
	"context"
	"io"
	"testing"
)

// Requests as mcpvisor's client sends them, per era.
const (
	benchInit          = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`
	benchInitialized   = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	benchCallHandshake = `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"0123456789abcdef"}}}`
	benchCallModern    = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcpvisor","version":"0.1.0"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"echo","arguments":{"text":"0123456789abcdef"}}}`
)

// lines is an io.Reader of some lines, then one line n times, one line
// per Read: each request arrives on its own, as a client that waits for
// each answer sends them.
type lines struct {
	first []string
	line  string
	n     int
}

func (l *lines) Read(p []byte) (int, error) {
	var s string
	switch {
	case len(l.first) > 0:
		s, l.first = l.first[0], l.first[1:]
	case l.n > 0:
		s = l.line
		l.n--
	default:
		return 0, io.EOF
	}
	return copy(p, s+"\n"), nil
}

// BenchmarkStdioCall measures the server's side of one tools/call over
// stdio: read, decode, dispatch, encode, write (to io.Discard), through
// Run, one request per read.
func BenchmarkStdioCall(b *testing.B) {
	for _, bc := range []struct {
		name  string
		first []string
		line  string
	}{
		{"2025-11-25", []string{benchInit, benchInitialized}, benchCallHandshake},
		{"2026-07-28", nil, benchCallModern},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := &lines{first: bc.first, line: bc.line, n: b.N}
			b.ReportAllocs()
			b.ResetTimer()
			if code := Run(context.Background(), Options{}, in, io.Discard); code != 0 {
				b.Fatalf("Run: exit code %d", code)
			}
		})
	}
}
