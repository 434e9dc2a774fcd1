package session

import (
	"context"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Complete sends completion/complete (with the stateless era's _meta when
// the session speaks it). A result without values has an empty list.
func (s *Session) Complete(ctx context.Context, params protocol.CompleteParams) (*protocol.CompleteResult, error) {
	params.Meta = s.meta.options(RequestOptions{Meta: params.Meta})
	var res protocol.CompleteResult
	if err := s.Call(ctx, protocol.MethodCompletionComplete, params, &res); err != nil {
		return nil, err
	}
	if res.Completion.Values == nil {
		res.Completion.Values = []string{}
	}
	return &res, nil
}
