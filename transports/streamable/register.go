package streamable

import (
	"context"

	"github.com/mcpvisor/mcpvisor/transports"
)

// The http kind: Streamable HTTP. Its dial takes the host's *EndLimiter
// from DialOptions.Extras, when there.
func init() {
	transports.Register(transports.Kind{
		Type:             transports.TypeHTTP,
		Label:            "HTTP",
		Remote:           true,
		Schemes:          []string{"http", "https"},
		Authenticates:    true,
		NetworkTransport: "tcp",
		Dial: func(cfg transports.Config, o transports.DialOptions) (transports.Dial, error) {
			ends, _ := transports.Extra[*EndLimiter](o)
			opts := Options{Client: o.HTTPClient, MaxFrameSize: int(o.MaxFrameSize), UserAgent: o.UserAgent, Logger: o.Logger, EndLimiter: ends}
			return func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
				return Dial(ctx, cfg, opts, r)
			}, nil
		},
	})
}
