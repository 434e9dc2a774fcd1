package ws

import (
	"context"

	"github.com/mcpvisor/mcpvisor/transports"
)

// The ws kind: WebSocket. Its handshake is an HTTP request, so a ws or
// wss URL names the same resource as its http or https twin (for OAuth).
func init() {
	transports.Register(transports.Kind{
		Type:             transports.TypeWS,
		Label:            "WebSocket",
		Remote:           true,
		Schemes:          []string{"http", "https", "ws", "wss"},
		HTTPSchemes:      map[string]string{"ws": "http", "wss": "https"},
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
