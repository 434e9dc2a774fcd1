package peers

import (
	"testing"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/bench/peers/harness"
)

// startHTTPMock starts a mock server process (mockBin) serving Streamable
// HTTP, both the session eras and the stateless one, on a free loopback
// port, and returns once it listens. The process is stopped (its stdin
// closed, which makes it shut down gracefully) when tb's test or
// benchmark ends.
func startHTTPMock(tb testing.TB) *harness.NetServer {
	tb.Helper()
	m, err := harness.StartNetServer(mockBin, mockserver.URLLinePrefix,
		"-transport", mockserver.TransportHTTP, "-listen", mockserver.DefaultListen)
	if err != nil {
		tb.Fatal("starting the HTTP mock server:", err)
	}
	tb.Cleanup(func() {
		if err := m.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return m
}
