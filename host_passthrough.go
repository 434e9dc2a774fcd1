package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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

// GetPromptWith is GetPrompt with options.
func (s *Supervisor) GetPromptWith(ctx context.Context, name string, args map[string]string, o RequestOptions) (*protocol.GetPromptResult, error) {
	e, err := s.route(ctx, name, func(p *pool) (poolEntry, bool) {
		e, ok := p.promptsByName.Get(name)
		return e, ok
	})
	if errors.Is(err, ErrUnknownTool) {
		err = ErrUnknownPrompt
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %q", err, name)
	}
	return onSession(ctx, s, e.h, func(ctx context.Context, sess *session.Session) (*protocol.GetPromptResult, error) {
		return sess.GetPromptWith(ctx, e.name, args, o.session())
	})
}

// ReadResourceWith is ReadResource with options.
func (s *Supervisor) ReadResourceWith(ctx context.Context, server, uri string, o RequestOptions) (*protocol.ReadResourceResult, error) {
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (*protocol.ReadResourceResult, error) {
		return sess.ReadResourceWith(ctx, uri, o.session())
	})
}

// Request sends a server a request the API has no method for (an
// extension's: tasks/get, skills/list, …) and returns its result raw;
// params is a JSON object or nil, and gets the request's _meta.
func (s *Supervisor) Request(ctx context.Context, server, method string, params json.RawMessage, o RequestOptions) (json.RawMessage, error) {
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (json.RawMessage, error) {
		return sess.Request(ctx, method, params, o.session())
	})
}
