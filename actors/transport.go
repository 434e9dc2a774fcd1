package actors

import (
	"context"
	"fmt"

	"github.com/mcpvisor/mcpvisor/actors/session"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio"
	"github.com/mcpvisor/mcpvisor/transports/streamable"
)

// dialConfig is what a server actor needs to build its transport: the
// per-kind options, derived once from Options.
type dialConfig struct {
	stdio      stdio.Options
	streamable streamable.Options
}

func (a *serverActor) dialConfig() dialConfig {
	ua := a.opts.ClientInfo.Name + "/" + a.opts.ClientInfo.Version
	return dialConfig{
		stdio: stdio.Options{
			MaxFrameSize:      a.opts.MaxFrameSize,
			CloseStdinTimeout: a.opts.CloseStdinTimeout,
			TerminateTimeout:  a.opts.TerminateTimeout,
			Logger:            a.log,
		},
		streamable: streamable.Options{
			MaxFrameSize: int(a.opts.MaxFrameSize),
			UserAgent:    ua,
			Logger:       a.log,
		},
	}
}

// dialer picks the transport for cfg.
func dialer(cfg ServerConfig, dc dialConfig) (session.DialFunc, error) {
	tcfg := cfg.Config
	switch cfg.Kind() {
	case transports.TypeStdio:
		return func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
			return stdio.Dial(ctx, tcfg, dc.stdio, r)
		}, nil
	case transports.TypeHTTP:
		return func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
			return streamable.Dial(ctx, tcfg, dc.streamable, r)
		}, nil
	case transports.TypeSSE, transports.TypeWS, transports.TypeSDK:
		return nil, fmt.Errorf("%w: transport %q is not available in this build yet", ErrUnsupportedTransport, cfg.Kind())
	}
	return nil, fmt.Errorf("%w: %q", ErrUnsupportedTransport, cfg.Kind())
}
