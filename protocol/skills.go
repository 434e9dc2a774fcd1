package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// The Skills extension (SEP-2640, "io.modelcontextprotocol/skills"): a
// server that declares it in capabilities.extensions publishes Agent
// Skills, each a directory of files served as ordinary resources (read
// with resources/read), enumerated by skills/list and described one by
// one by skills/get with a manifest of digests.

// Its identifier is ExtensionSkills and its methods MethodSkillsList and
// MethodSkillsGet (extensions.go).

// SkillFileName is the file every skill has at its root; a skill is
// addressed by the URI of its SKILL.md.
const SkillFileName = "SKILL.md"

// SkillResource is one file of a skill with the digest and size of its
// raw bytes.
type SkillResource struct {
	URI string `json:"uri"`
	// Digest is "sha256:" and the 64 lower-case hex digits of the
	// SHA-256 of the file's raw bytes.
	Digest string `json:"digest"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
}

// SkillFiles is a skill's "resources": the complete list of its files, or
// Dynamic when the server generates the content and publishes no digests.
type SkillFiles struct {
	Dynamic bool
	Files   []SkillResource
}

// ErrInvalidSkill: a skill entry without a valid "resources" member (an
// array or "dynamic"); such a skill must not be loaded.
var ErrInvalidSkill = errors.New("protocol: invalid skill entry")

// UnmarshalJSON accepts an array of SkillResource or the string
// "dynamic"; anything else (null included) is ErrInvalidSkill.
func (f *SkillFiles) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if string(data) == `"dynamic"` {
		*f = SkillFiles{Dynamic: true}
		return nil
	}
	if len(data) == 0 || data[0] != '[' {
		return fmt.Errorf("%w: resources is %s, not an array or \"dynamic\"", ErrInvalidSkill, data)
	}
	var files []SkillResource
	if err := json.Unmarshal(data, &files); err != nil {
		return fmt.Errorf("%w: resources: %v", ErrInvalidSkill, err)
	}
	*f = SkillFiles{Files: files}
	return nil
}

// MarshalJSON encodes the array, or "dynamic".
func (f SkillFiles) MarshalJSON() ([]byte, error) {
	if f.Dynamic {
		return []byte(`"dynamic"`), nil
	}
	if f.Files == nil {
		return []byte(`[]`), nil
	}
	return json.Marshal(f.Files)
}

// Skill is a skill's entry, as skills/list and skills/get return it.
type Skill struct {
	// URI is the resource URI of the skill's SKILL.md.
	URI string `json:"uri"`
	// Frontmatter is the SKILL.md's YAML frontmatter rendered as a JSON
	// object, verbatim: name and description, and every other field the
	// author wrote.
	Frontmatter json.RawMessage `json:"frontmatter"`
	// Resources lists the skill's files (SKILL.md included).
	Resources SkillFiles `json:"resources"`
}

// skillWire detects an entry without "resources", which SkillFiles'
// UnmarshalJSON never sees.
type skillWire struct {
	URI         string          `json:"uri"`
	Frontmatter json.RawMessage `json:"frontmatter"`
	Resources   json.RawMessage `json:"resources"`
}

// UnmarshalJSON decodes an entry; one without "resources" is
// ErrInvalidSkill.
func (s *Skill) UnmarshalJSON(data []byte) error {
	var w skillWire
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	if w.Resources == nil {
		return fmt.Errorf("%w: skill %q has no resources", ErrInvalidSkill, w.URI)
	}
	s.URI, s.Frontmatter = w.URI, w.Frontmatter
	return s.Resources.UnmarshalJSON(w.Resources)
}

// Name returns the frontmatter's name ("" when it has none).
func (s *Skill) Name() string {
	var fm struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(s.Frontmatter, &fm)
	return fm.Name
}

// File returns the entry of the file at uri, if the skill lists it.
func (s *Skill) File(uri string) (SkillResource, bool) {
	for _, f := range s.Resources.Files {
		if f.URI == uri {
			return f, true
		}
	}
	return SkillResource{}, false
}

// listSkillsResult is one page of skills/list.
type listSkillsResult struct {
	Meta       Meta    `json:"_meta,omitempty"`
	Skills     []Skill `json:"skills"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// GetSkillParams is the params of skills/get.
type GetSkillParams struct {
	Meta Meta   `json:"_meta,omitempty"`
	URI  string `json:"uri"`
}

// GetSkillResult is the result of skills/get.
type GetSkillResult struct {
	Meta  Meta  `json:"_meta,omitempty"`
	Skill Skill `json:"skill"`
}
