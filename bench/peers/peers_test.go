package peers

import (
	"context"
	"testing"
	"time"
)

// TestAllClientsTalkToTheMock checks the benchmark setup without running
// benchmarks: every client connects to the mock server binary in every
// era, negotiates the era's version and gets the echo back, sequentially
// and with calls in flight; and no server process outlives its session.
func TestAllClientsTalkToTheMock(t *testing.T) {
	for _, p := range peers {
		for _, era := range eras {
			t.Run("client="+p.name+"/era="+era, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				s, err := p.connect(ctx, mockBin, era)
				if err != nil {
					t.Fatal("connect:", err)
				}
				closed := false
				defer func() {
					if !closed {
						s.close()
					}
				}()
				if got := s.version(); got != wantVersion[era] {
					t.Errorf("negotiated %q, want %q", got, wantVersion[era])
				}
				text, err := s.echo(ctx)
				if err != nil {
					t.Fatal("echo:", err)
				}
				if text != echoText {
					t.Fatalf("echo returned %q, want %q", text, echoText)
				}
				if err := runCalls(ctx, s, 100, inFlight); err != nil {
					t.Fatal("concurrent echo:", err)
				}
				closed = true
				if err := s.close(); err != nil {
					t.Fatal("close:", err)
				}
			})
		}
	}
	if pids := waitNoMockProcesses(2 * time.Second); len(pids) > 0 {
		t.Errorf("mock server processes still running after close: %v", pids)
	}
}
