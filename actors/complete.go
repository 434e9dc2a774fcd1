package actors

import (
	"context"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/session"
)

// Complete asks server for completions of an argument of one of its
// prompts or resource templates (completion/complete). ref names the
// prompt by the server's own name. A server that did not declare the
// completions capability is asked anyway; its error comes back as is.
func (s *System) Complete(ctx context.Context, server string, ref protocol.CompletionReference, arg protocol.CompletionArgument, cctx *protocol.CompletionContext) (*protocol.CompleteResult, error) {
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	params := protocol.CompleteParams{Ref: ref, Argument: arg, Context: cctx}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (*protocol.CompleteResult, error) {
		return sess.Complete(ctx, params)
	})
}
