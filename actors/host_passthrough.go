package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/session"
)

// RequestOptions configure one request to a server (GetPromptWith,
// ReadResourceWith, Request). The zero value adds nothing.
type RequestOptions struct {
	// Capabilities, when set, are declared in the request's _meta in
	// place of the supervisor's own, to a server of the stateless era
	// (2026-07-28), which reads capabilities per request: a gateway
	// declares those of the client it serves, so that the server asks for
	// no input (and creates no task) that client cannot handle. A server
	// of a handshake era ignores them (its capabilities were declared
	// once, at initialize).
	Capabilities *protocol.ClientCapabilities
	// Meta is added to the request's _meta.
	Meta protocol.Meta
}

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
func (s *System) GetPromptWith(ctx context.Context, name string, args map[string]string, o RequestOptions) (*protocol.GetPromptResult, error) {
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
func (s *System) ReadResourceWith(ctx context.Context, server, uri string, o RequestOptions) (*protocol.ReadResourceResult, error) {
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (*protocol.ReadResourceResult, error) {
		return sess.ReadResourceWith(ctx, uri, o.session())
	})
}

// Request sends server a request the API has no method for (those of an
// extension: the tasks extension's tasks/get, tasks/update and
// tasks/cancel, the skills extension's skills/list and skills/get) and
// returns its result raw. params is a JSON object or nil; the request's
// _meta is added as for any request (see RequestOptions).
func (s *System) Request(ctx context.Context, server, method string, params json.RawMessage, o RequestOptions) (json.RawMessage, error) {
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (json.RawMessage, error) {
		return sess.Request(ctx, method, params, o.session())
	})
}
