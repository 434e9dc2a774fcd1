package mcpvisor

import (
	"fmt"
	"net/http"

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
	client, authErr := a.authClient(client) // auth.go: the bearer token on every request
	extras := []any{a.opts.Sandbox, a.opts.sessionEnds}
	if srv := a.opts.InProcess[a.h.name]; srv != nil {
		extras = append(extras, srv)
	}
	return dialConfig{
		err: authErr,
		opts: transports.DialOptions{
			Logger:            a.log,
			MaxFrameSize:      a.opts.MaxFrameSize,
			UserAgent:         a.opts.ClientInfo.Name + "/" + a.opts.ClientInfo.Version,
			HTTPClient:        client,
			CloseStdinTimeout: a.opts.CloseStdinTimeout,
			TerminateTimeout:  a.opts.TerminateTimeout,
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
