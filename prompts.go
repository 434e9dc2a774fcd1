package mcpvisor

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Prompts returns the servers' prompts: their lists and prompts/get.
func (s *Supervisor) Prompts() Prompts { return Prompts{s} }

// Prompts is what a Supervisor offers of its servers' prompts, named
// mcp__<server>__<prompt> like tools: a handle got from
// Supervisor.Prompts, safe for concurrent use like the Supervisor.
type Prompts struct{ s *Supervisor }

// List returns the prompts of one server, or of every server when
// server is empty, named mcp__<server>__<prompt>, sorted by name.
func (ps Prompts) List(server string) ([]Prompt, error) {
	s := ps.s
	p := s.pool.Load()
	if server == "" {
		return append([]Prompt(nil), p.prompts...), nil
	}
	if err := s.offered(p, server); err != nil {
		return nil, err
	}
	var out []Prompt
	for _, pr := range p.prompts {
		if pr.Server == server {
			out = append(out, pr)
		}
	}
	return out, nil
}

// Get renders a prompt by its qualified name.
func (ps Prompts) Get(ctx context.Context, name string, args map[string]string) (*protocol.GetPromptResult, error) {
	s := ps.s
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
		return sess.GetPrompt(ctx, e.name, args)
	})
}

// GetWith is Get with options.
func (ps Prompts) GetWith(ctx context.Context, name string, args map[string]string, o RequestOptions) (*protocol.GetPromptResult, error) {
	s := ps.s
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
