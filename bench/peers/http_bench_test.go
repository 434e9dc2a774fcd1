package peers

import (
	"context"
	"testing"

	"github.com/mcpvisor/mcpvisor/bench/peers/harness"
)

// BenchmarkHTTPCallSequential is BenchmarkCallSequential over Streamable
// HTTP: b.N sequential tools/call of echo on one session, against one mock
// server process serving HTTP (started per benchmark, so that the
// benchmark process's CPU is the client's).
func BenchmarkHTTPCallSequential(b *testing.B) {
	forEachPeer(b, func(b *testing.B, p harness.Peer, era string) {
		benchHTTPCalls(b, p, era, 1)
	})
}

// BenchmarkHTTPCallConcurrent32 is BenchmarkCallConcurrent32 over
// Streamable HTTP: 32 calls in flight on one session.
func BenchmarkHTTPCallConcurrent32(b *testing.B) {
	forEachPeer(b, func(b *testing.B, p harness.Peer, era string) {
		benchHTTPCalls(b, p, era, inFlight)
	})
}

func benchHTTPCalls(b *testing.B, p harness.Peer, era string, workers int) {
	srv := startHTTPMock(b)
	benchCalls(b, era, workers, func(ctx context.Context) (harness.Session, error) { return p.ConnectHTTP(ctx, srv.URL, era) })
}
