package mcpvisor

import (
	"context"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Complete asks a server for completions of an argument of one of its
// prompts (ref.Type protocol.RefPrompt, ref.Name the server's own prompt
// name) or resource templates (protocol.RefResource, ref.URI the
// template), given the argument's value so far and, optionally, the
// arguments already resolved. The server's JSON-RPC error (for one that
// does not offer completions) is returned as a *protocol.Error.
func (s *Supervisor) Complete(ctx context.Context, server string, ref protocol.CompletionReference, arg protocol.CompletionArgument, cctx *protocol.CompletionContext) (*protocol.CompleteResult, error) {
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	params := protocol.CompleteParams{Ref: ref, Argument: arg, Context: cctx}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (*protocol.CompleteResult, error) {
		return sess.Complete(ctx, params)
	})
}
