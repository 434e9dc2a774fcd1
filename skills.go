package mcpvisor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Skills (the skills extension, SEP-2640): a server that declares
// protocol.ExtensionSkills publishes Agent Skills, whose files are
// resources. Skills().List and Skills().Get return their entries (each with a
// manifest of digests); Skills().Load is the host's skill-loading path: it
// reads a skill's SKILL.md and verifies it against the entry before
// returning it, and the LoadedSkill reads the skill's other files, each
// verified, only when asked. Nothing is read ahead of need: listing reads
// no file, and neither does connecting.

// ErrNoSkills: the server does not declare the skills extension.
var ErrNoSkills = session.ErrNoSkills

// ErrSkillVerification matches a *SkillVerificationError: content that is
// not what the skill's entry describes, which must not be used.
var ErrSkillVerification = errors.New("mcpvisor: skill content does not match its entry")

// SkillVerificationError says which file of a skill failed verification
// and how.
type SkillVerificationError struct {
	Server string
	URI    string // the file
	Reason string
}

func (e *SkillVerificationError) Error() string {
	return fmt.Sprintf("%s: server %q, %s: %s", ErrSkillVerification, e.Server, e.URI, e.Reason)
}

// Is makes errors.Is(err, ErrSkillVerification) true.
func (e *SkillVerificationError) Is(target error) bool { return target == ErrSkillVerification }

// LoadedSkill is a skill the host loaded: its verified SKILL.md and the
// entry it was verified against, which bounds what ReadFile may read.
//
// Concurrency: a LoadedSkill is immutable; ReadFile is safe for
// concurrent use.
type LoadedSkill struct {
	// Server is the server the skill came from: a skill's identity is the
	// pair of server and URI.
	Server string
	// Entry is the held entry.
	Entry protocol.Skill
	// Content is the SKILL.md, verified.
	Content []byte

	sup *Supervisor
}

// Root returns the URI of the skill's directory (its SKILL.md's URI
// without the file name).
func (l *LoadedSkill) Root() string {
	return strings.TrimSuffix(l.Entry.URI, "/"+protocol.SkillFileName)
}

// ReadFile reads a file of the skill: ref is a path relative to the
// skill's root (as SKILL.md refers to its files) or a URI. The file must
// be listed in the held entry (unless its resources are "dynamic", when
// any file under the root may be read) and its content must match the
// entry; otherwise the error matches ErrSkillVerification.
func (l *LoadedSkill) ReadFile(ctx context.Context, ref string) ([]byte, error) {
	uri := ref
	if !strings.Contains(ref, "://") {
		rel := path.Clean("/" + ref)
		uri = l.Root() + rel
	}
	if !strings.HasPrefix(uri, l.Root()+"/") {
		return nil, &SkillVerificationError{Server: l.Server, URI: uri, Reason: "not a file of the skill"}
	}
	return readVerified(ctx, l.sup, l.Server, l.Entry, uri)
}

// readVerified reads uri from server and checks it against entry's
// manifest (an unlisted file of a listed manifest is a failure).
func readVerified(ctx context.Context, s *Supervisor, server string, entry protocol.Skill, uri string) ([]byte, error) {
	fail := func(reason string) error { return &SkillVerificationError{Server: server, URI: uri, Reason: reason} }
	var want protocol.SkillResource
	if !entry.Resources.Dynamic {
		var ok bool
		if want, ok = entry.File(uri); !ok {
			return nil, fail("the skill's entry does not list it")
		}
	}
	res, err := s.Resources().Read(ctx, server, uri)
	if err != nil {
		return nil, err
	}
	content, err := resourceBytes(res, uri)
	if err != nil {
		return nil, fail(err.Error())
	}
	if entry.Resources.Dynamic {
		return content, nil
	}
	if int64(len(content)) != want.Size {
		return nil, fail(fmt.Sprintf("%d bytes, the entry says %d", len(content), want.Size))
	}
	sum := sha256.Sum256(content)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != want.Digest {
		return nil, fail("digest " + got + " differs from the entry's")
	}
	return content, nil
}

// resourceBytes returns the raw bytes of the contents of uri in res.
func resourceBytes(res *protocol.ReadResourceResult, uri string) ([]byte, error) {
	for _, c := range res.Contents {
		if c.URI != uri && len(res.Contents) > 1 {
			continue
		}
		if c.Blob != "" {
			b, err := base64.StdEncoding.DecodeString(c.Blob)
			if err != nil {
				return nil, fmt.Errorf("blob is not base64: %v", err)
			}
			return b, nil
		}
		return []byte(c.Text), nil
	}
	return nil, errors.New("the server returned no contents for it")
}

// checkFrontmatter compares the YAML frontmatter of a SKILL.md with the
// entry's frontmatter (a JSON object), field by field.
func checkFrontmatter(content []byte, entry json.RawMessage) error {
	fm, ok := frontmatterOf(content)
	if !ok {
		return errors.New("no YAML frontmatter")
	}
	var parsed map[string]any
	if err := yaml.Unmarshal(fm, &parsed); err != nil {
		return fmt.Errorf("frontmatter is not YAML: %v", err)
	}
	// Through JSON, so that both sides have JSON's types.
	asJSON, err := json.Marshal(parsed)
	if err != nil {
		return fmt.Errorf("frontmatter has no JSON form: %v", err)
	}
	var got, want map[string]any
	if err := json.Unmarshal(asJSON, &got); err != nil {
		return err
	}
	if err := json.Unmarshal(entry, &want); err != nil {
		return fmt.Errorf("the entry's frontmatter is not an object: %v", err)
	}
	for k, v := range want {
		if !reflect.DeepEqual(got[k], v) {
			return fmt.Errorf("frontmatter field %q differs from the entry's", k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			return fmt.Errorf("frontmatter field %q is not in the entry", k)
		}
	}
	return nil
}

// frontmatterOf returns the YAML between a leading "---" line and the
// next "---" line.
func frontmatterOf(content []byte) ([]byte, bool) {
	content = bytes.TrimPrefix(content, []byte("\ufeff"))
	first, rest, ok := bytes.Cut(content, []byte("\n"))
	if !ok || string(bytes.TrimRight(first, "\r")) != "---" {
		return nil, false
	}
	var fm []byte
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		if string(bytes.TrimRight(line, "\r")) == "---" {
			return fm, true
		}
		fm = append(append(fm, line...), '\n')
	}
	return nil, false
}
