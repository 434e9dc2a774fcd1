package inproc

import (
	"context"
	"errors"

	"github.com/mcpvisor/mcpvisor/transports"
)

// The sdk kind: a server in the host's process. Its dial takes the Server
// from DialOptions.Extras; without one it fails at once with a
// *transports.ConfigError.
func init() {
	transports.Register(transports.Kind{
		Type:  transports.TypeSDK,
		Label: "in-process",
		Dial: func(_ transports.Config, o transports.DialOptions) (transports.Dial, error) {
			srv, ok := transports.Extra[Server](o)
			if !ok {
				return nil, &transports.ConfigError{Err: errors.New(`no in-process server is registered under this name (Options.InProcess)`)}
			}
			opts := Options{MaxFrameSize: int(o.MaxFrameSize), Logger: o.Logger}
			return func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
				return Dial(ctx, srv, opts, r)
			}, nil
		},
	})
}
