package mcpvisor

import (
	"context"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

func (o RequestOptions) session() session.RequestOptions {
	return session.RequestOptions{Meta: o.Meta, Capabilities: o.Capabilities}
}

// inputHandler adapts Options.Inputs to a server's session.
func inputHandler(o *Options, server string) session.InputHandler {
	if o.Inputs == nil {
		return nil
	}
	return func(ctx context.Context, method string, reqs protocol.InputRequests) (protocol.InputResponses, error) {
		return o.Inputs(ctx, server, method, reqs)
	}
}
