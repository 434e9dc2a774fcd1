package peers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mcpvisor/mcpvisor/bench/peers/harness"
	mcpsession "github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/streamable"
)

// The clients (harness.Peers) live in package harness, shared with the
// benchmark runner (cmd/bench). What is here is only for
// BenchmarkIdleSessionMemory.

// --- mcpvisor's session layer, without a Supervisor ---

// directSession is what one server of a Supervisor holds once connected,
// without the Supervisor: an session.Session over
// transports/streamable. BenchmarkIdleSessionMemory uses it to separate
// the connection's cost from the Supervisor's per-server cost.
type directSession struct{ s *mcpsession.Session }

// connectMcpvisorSession opens a session to url through
// transports/streamable (with its defaults, as a Supervisor sets them up;
// client nil means a client of the session's own, as a Supervisor gives
// each server) and lists the tools.
func connectMcpvisorSession(ctx context.Context, url, era string, client *http.Client) (harness.Session, error) {
	cfg := transports.Config{Type: transports.TypeHTTP, URL: url}
	dial := func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
		return streamable.Dial(ctx, cfg, streamable.Options{Client: client, UserAgent: "peers-bench/1.0.0"}, r)
	}
	s, err := mcpsession.Open(ctx, dial, mcpsession.Options{
		ClientInfo:      protocol.Implementation{Name: "peers-bench", Version: "1.0.0"},
		ProtocolVersion: harness.Pinned(era),
	})
	if err != nil {
		return nil, err
	}
	d := &directSession{s}
	if _, err := s.Lists().Tools(ctx); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	return d, nil
}

func (d *directSession) Echo(ctx context.Context) (string, error) {
	res, err := d.s.CallTool(ctx, "echo", harness.EchoArgs, nil)
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) != 1 {
		return "", fmt.Errorf("unexpected result %+v", res)
	}
	return res.Content[0].Text, nil
}

func (d *directSession) Version() string { return d.s.Peer().Version }

func (d *directSession) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return d.s.Close(ctx, nil)
}
