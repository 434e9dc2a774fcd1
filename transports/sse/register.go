package sse

import (
	"context"

	"github.com/mcpvisor/mcpvisor/transports"
)

// The sse kind: the legacy HTTP+SSE transport.
func init() {
	transports.Register(transports.Kind{
		Type:             transports.TypeSSE,
		Label:            "SSE",
		Remote:           true,
		Schemes:          []string{"http", "https"},
		Authenticates:    true,
		NetworkTransport: "tcp",
		Dial: func(cfg transports.Config, o transports.DialOptions) (transports.Dial, error) {
			opts := Options{Client: o.HTTPClient, MaxFrameSize: int(o.MaxFrameSize), UserAgent: o.UserAgent, Logger: o.Logger}
			return func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
				return Dial(ctx, cfg, opts, r)
			}, nil
		},
	})
}
