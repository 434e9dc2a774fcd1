package actors

import (
	"context"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/session"
)

// ListSkills lists the skills a server publishes (the skills extension,
// SEP-2640); session.ErrNoSkills when it does not declare the extension.
// Nothing is cached: the host asks when it needs the catalogue.
func (s *System) ListSkills(ctx context.Context, server string) ([]protocol.Skill, error) {
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) ([]protocol.Skill, error) {
		return sess.ListSkills(ctx)
	})
}

// GetSkill returns the entry of one skill of a server by the URI of its
// SKILL.md (skills/get).
func (s *System) GetSkill(ctx context.Context, server, uri string) (*protocol.Skill, error) {
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (*protocol.Skill, error) {
		return sess.GetSkill(ctx, uri)
	})
}
