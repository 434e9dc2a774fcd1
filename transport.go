package mcpvisor

import (
	"fmt"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/transports"
)

// dialConfig is what a server actor needs to build its transport: the
// host's dial options, derived once from Options (the in-process server
// registered under the server's name among its extras), and why the
// server's authorization cannot be set up, if it cannot.
type dialConfig struct {
	opts transports.DialOptions
	err  error
}

func (a *serverActor) dialConfig() dialConfig {
	var client *http.Client // nil: the transport builds one from the server's TLS settings
	if a.cfg.TLS == nil {
		client = a.opts.sharedHTTP
	}
	client, authErr := a.h.authClient(&a.cfg, a.opts, a.log, client) // auth_source.go: the bearer token on every request
	return dialConfigFor(a.h, a.opts, a.log, client, authErr)
}

// dialConfigFor is the dial config of server h's connections over client
// (nil: the transport's own), whose authorization could not be set up
// when authErr is not nil: the server actor's connection, and the
// per-principal sessions of usersessions.go.
func dialConfigFor(h *serverHandle, opts *runOptions, log zerolog.Logger, client *http.Client, authErr error) dialConfig {
	extras := []any{opts.Sandbox, opts.sessionEnds}
	if srv := opts.InProcess[h.name]; srv != nil {
		extras = append(extras, srv)
	}
	return dialConfig{
		err: authErr,
		opts: transports.DialOptions{
			Logger:            log,
			MaxFrameSize:      opts.MaxFrameSize,
			UserAgent:         opts.ClientInfo.Name + "/" + opts.ClientInfo.Version,
			HTTPClient:        client,
			CloseStdinTimeout: opts.CloseStdinTimeout,
			TerminateTimeout:  opts.TerminateTimeout,
			Extras:            extras,
		},
	}
}

// dialer binds cfg to its kind's dial (see the table in package
// transports).
func dialer(cfg ServerConfig, dc dialConfig) (session.DialFunc, error) {
	if dc.err != nil {
		return nil, dc.err
	}
	k, ok := transports.Lookup(cfg.Kind())
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedTransport, cfg.Kind())
	}
	tcfg := cfg.Config
	if cfg.Trust == TrustSandbox && tcfg.Sandbox == nil {
		tcfg.Sandbox = &transports.Sandbox{Enabled: true} // as "sandbox": true
	}
	dial, err := k.Dial(tcfg, dc.opts)
	if err != nil {
		return nil, err
	}
	return session.DialFunc(dial), nil
}
