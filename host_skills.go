package mcpvisor

import (
	"context"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// ListSkills lists the skills server publishes (every page); ErrNoSkills
// when it does not declare the extension. An entry whose "resources" is
// invalid is left out (it must not be loaded).
func (s *Supervisor) ListSkills(ctx context.Context, server string) ([]protocol.Skill, error) {
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) ([]protocol.Skill, error) {
		return sess.Lists().Skills(ctx)
	})
}

// GetSkill returns the entry of server's skill whose SKILL.md is at uri
// (skills/get), for a skill known by its URI alone.
func (s *Supervisor) GetSkill(ctx context.Context, server, uri string) (*protocol.Skill, error) {
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (*protocol.Skill, error) {
		return sess.Lists().Skill(ctx, uri)
	})
}
