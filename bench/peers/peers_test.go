package peers

import (
	"context"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor/bench/peers/harness"
)

// TestAllClientsTalkToTheMock checks the benchmark setup without running
// benchmarks: every client connects to the mock server binary in every
// era, negotiates the era's version and gets the echo back, sequentially
// and with calls in flight; and no server process outlives its session.
func TestAllClientsTalkToTheMock(t *testing.T) {
	for _, p := range harness.Peers {
		for _, era := range harness.Eras {
			t.Run("client="+p.Name+"/era="+era, func(t *testing.T) {
				checkClient(t, era, func(ctx context.Context) (harness.Session, error) {
					return p.Connect(ctx, harness.Command{Path: mockBin}, era)
				})
			})
		}
	}
	if pids := waitNoMockProcesses(2 * time.Second); len(pids) > 0 {
		t.Errorf("mock server processes still running after close: %v", pids)
	}
}

// TestAllClientsTalkToTheMockHTTP is TestAllClientsTalkToTheMock over
// Streamable HTTP, against one mock server process.
func TestAllClientsTalkToTheMockHTTP(t *testing.T) {
	srv := startHTTPMock(t)
	for _, p := range harness.Peers {
		for _, era := range harness.Eras {
			t.Run("client="+p.Name+"/era="+era, func(t *testing.T) {
				checkClient(t, era, func(ctx context.Context) (harness.Session, error) { return p.ConnectHTTP(ctx, srv.URL, era) })
			})
		}
	}
}

// checkClient connects, checks the negotiated version, echoes once and
// then 100 times with calls in flight, and closes.
func checkClient(t *testing.T, era string, connect func(context.Context) (harness.Session, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := connect(ctx)
	if err != nil {
		t.Fatal("connect:", err)
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	if got := s.Version(); got != harness.WantVersion[era] {
		t.Errorf("negotiated %q, want %q", got, harness.WantVersion[era])
	}
	text, err := s.Echo(ctx)
	if err != nil {
		t.Fatal("echo:", err)
	}
	if text != harness.EchoText {
		t.Fatalf("echo returned %q, want %q", text, harness.EchoText)
	}
	if err := runCalls(ctx, s, 100, inFlight); err != nil {
		t.Fatal("concurrent echo:", err)
	}
	closed = true
	if err := s.Close(); err != nil {
		t.Fatal("close:", err)
	}
}

// TestIdleClientsOpenSessions checks BenchmarkIdleSessionMemory's setup
// on a few sessions: every way of holding idle sessions opens them in the
// session era and closes them.
func TestIdleClientsOpenSessions(t *testing.T) {
	srv := startHTTPMock(t)
	for _, c := range idleClients {
		t.Run("client="+c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			h, err := c.start(ctx, srv.URL)
			if err != nil {
				t.Fatal("start:", err)
			}
			err = h.open(ctx, 3)
			if cerr := h.close(); err == nil && cerr != nil {
				t.Fatal("close:", cerr)
			}
			if err != nil {
				t.Fatal("open:", err)
			}
		})
	}
}
