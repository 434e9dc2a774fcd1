package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSkillEntries(t *testing.T) {
	var s Skill
	require.NoError(t, json.Unmarshal([]byte(`{"uri":"skill://a/SKILL.md","frontmatter":{"name":"a","description":"d"},
		"resources":[{"uri":"skill://a/SKILL.md","digest":"sha256:00","size":3}]}`), &s))
	assert.Equal(t, "a", s.Name())
	f, ok := s.File("skill://a/SKILL.md")
	assert.True(t, ok)
	assert.Equal(t, int64(3), f.Size)
	_, ok = s.File("skill://a/other.md")
	assert.False(t, ok)

	require.NoError(t, json.Unmarshal([]byte(`{"uri":"skill://d/SKILL.md","frontmatter":{},"resources":"dynamic"}`), &s))
	assert.True(t, s.Resources.Dynamic)
	out, err := json.Marshal(s)
	require.NoError(t, err)
	assert.JSONEq(t, `{"uri":"skill://d/SKILL.md","frontmatter":{},"resources":"dynamic"}`, string(out))

	for name, bad := range map[string]string{
		"no resources":   `{"uri":"skill://x/SKILL.md","frontmatter":{}}`,
		"null resources": `{"uri":"skill://x/SKILL.md","frontmatter":{},"resources":null}`,
		"other string":   `{"uri":"skill://x/SKILL.md","frontmatter":{},"resources":"static"}`,
		"object":         `{"uri":"skill://x/SKILL.md","frontmatter":{},"resources":{}}`,
	} {
		assert.ErrorIs(t, json.Unmarshal([]byte(bad), &Skill{}), ErrInvalidSkill, name)
	}
}
