package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/httppeer"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/streamable"
)

// openHTTP opens a session with the peer over Streamable HTTP.
func openHTTP(t *testing.T, p *httppeer.Peer, opts session.Options) (*session.Session, error) {
	t.Helper()
	if opts.ClientInfo.Name == "" {
		opts.ClientInfo = protocol.Implementation{Name: "mcpvisor-test", Version: "0"}
	}
	dial := func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
		return streamable.Dial(ctx, transports.Config{Type: transports.TypeHTTP, URL: p.URL()}, streamable.Options{}, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := session.Open(ctx, dial, opts)
	if s != nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.Close(ctx, nil)
		})
	}
	return s, err
}
