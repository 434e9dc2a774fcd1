package mcpvisor

import (
	"context"
	"fmt"
	"net/http"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/inproc"
	"github.com/mcpvisor/mcpvisor/transports/sse"
	stdiot "github.com/mcpvisor/mcpvisor/transports/stdio"
	"github.com/mcpvisor/mcpvisor/transports/streamable"
	"github.com/mcpvisor/mcpvisor/transports/ws"
)

// dialConfig is what a server actor needs to build its transport: the
// per-kind options, derived once from Options, and the in-process server
// registered under the server's name, if any.
type dialConfig struct {
	stdio      stdiot.Options
	streamable streamable.Options
	sse        sse.Options
	ws         ws.Options
	inproc     inproc.Options
	inprocSrv  inproc.Server
	err        error // the server's authorization cannot be set up
}

func (a *serverActor) dialConfig() dialConfig {
	ua := a.opts.ClientInfo.Name + "/" + a.opts.ClientInfo.Version
	maxFrame := int(a.opts.MaxFrameSize)
	var client *http.Client // nil: the transport builds one from the server's TLS settings
	if a.cfg.TLS == nil {
		client = a.opts.sharedHTTP
	}
	client, authErr := a.authClient(client) // auth.go: the bearer token on every request
	return dialConfig{
		err: authErr,
		stdio: stdiot.Options{
			MaxFrameSize:      a.opts.MaxFrameSize,
			CloseStdinTimeout: a.opts.CloseStdinTimeout,
			TerminateTimeout:  a.opts.TerminateTimeout,
			Logger:            a.log,
			Sandbox:           a.opts.Sandbox,
		},
		streamable: streamable.Options{Client: client, MaxFrameSize: maxFrame, UserAgent: ua, Logger: a.log, EndLimiter: a.opts.sessionEnds},
		sse:        sse.Options{Client: client, MaxFrameSize: maxFrame, UserAgent: ua, Logger: a.log},
		ws:         ws.Options{Client: client, MaxFrameSize: maxFrame, UserAgent: ua, Logger: a.log},
		inproc:     inproc.Options{MaxFrameSize: maxFrame, Logger: a.log},
		inprocSrv:  a.opts.InProcess[a.h.name],
	}
}

// dialer picks the transport for cfg.
func dialer(cfg ServerConfig, dc dialConfig) (session.DialFunc, error) {
	if dc.err != nil {
		return nil, dc.err
	}
	tcfg := cfg.Config
	if cfg.Trust == TrustSandbox && tcfg.Sandbox == nil {
		tcfg.Sandbox = &transports.Sandbox{Enabled: true} // as "sandbox": true
	}
	switch cfg.Kind() {
	case transports.TypeStdio:
		return func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
			return stdiot.Dial(ctx, tcfg, dc.stdio, r)
		}, nil
	case transports.TypeHTTP:
		return func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
			return streamable.Dial(ctx, tcfg, dc.streamable, r)
		}, nil
	case transports.TypeSSE:
		return func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
			return sse.Dial(ctx, tcfg, dc.sse, r)
		}, nil
	case transports.TypeWS:
		return func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
			return ws.Dial(ctx, tcfg, dc.ws, r)
		}, nil
	case transports.TypeSDK:
		if dc.inprocSrv == nil {
			return nil, &transports.ConfigError{Err: fmt.Errorf(`no in-process server is registered under this name (Options.InProcess)`)}
		}
		return func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
			return inproc.Dial(ctx, dc.inprocSrv, dc.inproc, r)
		}, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnsupportedTransport, cfg.Kind())
}
