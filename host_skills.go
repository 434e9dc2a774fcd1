package mcpvisor

import (
	"context"
	"strings"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Skills returns the servers' skills (the skills extension): their
// lists, their entries and the loading of a skill's files.
func (s *Supervisor) Skills() Skills { return Skills{s} }

// Skills is what a Supervisor offers of its servers' skills: a handle got
// from Supervisor.Skills, safe for concurrent use like the Supervisor.
type Skills struct{ s *Supervisor }

// List lists the skills server publishes (every page); ErrNoSkills
// when it does not declare the extension. An entry whose "resources" is
// invalid is left out (it must not be loaded).
func (sk Skills) List(ctx context.Context, server string) ([]protocol.Skill, error) {
	s := sk.s
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) ([]protocol.Skill, error) {
		return sess.Lists().Skills(ctx)
	})
}

// Get returns the entry of server's skill whose SKILL.md is at uri
// (skills/get), for a skill known by its URI alone.
func (sk Skills) Get(ctx context.Context, server, uri string) (*protocol.Skill, error) {
	s := sk.s
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (*protocol.Skill, error) {
		return sess.Lists().Skill(ctx, uri)
	})
}

// Load loads server's skill described by entry: it reads the
// skill's SKILL.md and verifies it against the entry: its size and
// digest (unless the entry's resources are "dynamic") and its YAML
// frontmatter, field by field, against the entry's frontmatter. Content
// that fails is not returned: the error matches ErrSkillVerification.
func (sk Skills) Load(ctx context.Context, server string, entry protocol.Skill) (*LoadedSkill, error) {
	s := sk.s
	if !strings.HasSuffix(entry.URI, "/"+protocol.SkillFileName) {
		return nil, &SkillVerificationError{Server: server, URI: entry.URI, Reason: "a skill's URI names its " + protocol.SkillFileName}
	}
	content, err := readVerified(ctx, s, server, entry, entry.URI)
	if err != nil {
		return nil, err
	}
	if err := checkFrontmatter(content, entry.Frontmatter); err != nil {
		return nil, &SkillVerificationError{Server: server, URI: entry.URI, Reason: err.Error()}
	}
	return &LoadedSkill{Server: server, Entry: entry, Content: content, sup: s}, nil
}
