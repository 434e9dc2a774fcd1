package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// ErrNoSkills: the server did not declare the skills extension
// (protocol.ExtensionSkills), so it is not asked skills/list or
// skills/get.
var ErrNoSkills = errors.New("session: the server does not declare the skills extension")

// skillsPage is one page of skills/list with its entries undecoded, so
// that an invalid entry is skipped without losing the others.
type skillsPage struct {
	Skills     []json.RawMessage `json:"skills"`
	NextCursor string            `json:"nextCursor,omitempty"`
	TTLMs      *int64            `json:"ttlMs,omitempty"`
	CacheScope string            `json:"cacheScope,omitempty"`
}

// Skills lists every skill the server publishes, following
// pagination. An invalid entry (protocol.ErrInvalidSkill) is left out,
// with a warning; the others are kept. It fails with ErrNoSkills when the
// server did not declare the extension.
func (ls *Lists) Skills(ctx context.Context) ([]protocol.Skill, error) {
	if _, ok := ls.s.peer.Capabilities.Extensions[protocol.ExtensionSkills]; !ok {
		return nil, ErrNoSkills
	}
	raws, err := listAll(ctx, ls, protocol.MethodSkillsList, func(r *skillsPage) ([]json.RawMessage, string, protocol.CacheHint) {
		return r.Skills, r.NextCursor, protocol.HintOf(r.TTLMs, r.CacheScope)
	})
	if err != nil {
		return nil, err
	}
	skills := make([]protocol.Skill, 0, len(raws))
	for _, raw := range raws {
		var sk protocol.Skill
		if err := json.Unmarshal(raw, &sk); err != nil {
			ls.s.core.log.Warn().Err(err).Msg("skill entry left out")
			continue
		}
		skills = append(skills, sk)
	}
	return skills, nil
}

// Skill returns the entry of the skill whose SKILL.md is at uri.
func (ls *Lists) Skill(ctx context.Context, uri string) (*protocol.Skill, error) {
	s := ls.s
	if _, ok := s.peer.Capabilities.Extensions[protocol.ExtensionSkills]; !ok {
		return nil, ErrNoSkills
	}
	var res protocol.GetSkillResult
	if err := s.Call(ctx, protocol.MethodSkillsGet, protocol.GetSkillParams{Meta: s.meta.options(RequestOptions{}), URI: uri}, &res); err != nil {
		return nil, fmt.Errorf("skill %q: %w", uri, err)
	}
	return &res.Skill, nil
}
