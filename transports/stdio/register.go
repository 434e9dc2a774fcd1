package stdio

import (
	"context"

	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
)

// The stdio kind: a process started from the config's command. Its dial
// takes the host's sandbox settings from DialOptions.Extras (a
// sandbox.Options), when there.
func init() {
	transports.Register(transports.Kind{
		Type:             transports.TypeStdio,
		Command:          true,
		NetworkTransport: "pipe",
		Dial: func(cfg transports.Config, o transports.DialOptions) (transports.Dial, error) {
			sb, _ := transports.Extra[sandbox.Options](o)
			opts := Options{
				MaxFrameSize:      o.MaxFrameSize,
				CloseStdinTimeout: o.CloseStdinTimeout,
				TerminateTimeout:  o.TerminateTimeout,
				Logger:            o.Logger,
				Sandbox:           sb,
			}
			return func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
				return Dial(ctx, cfg, opts, r)
			}, nil
		},
	})
}
