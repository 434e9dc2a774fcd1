package mockserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The skills extension (io.modelcontextprotocol/skills, SEP-2640) for the
// conformance suite's sep-2640 scenarios, served with
// Options.Conformance: one skill, demo-skill, whose files (SKILL.md and
// scripts/run.sh) are resources under skill://mcpvisor/demo-skill/,
// listed by skills/list, fetched by skills/get, and browsable with
// resources/directory/read.

const (
	skillDir   = "skill://mcpvisor/demo-skill"
	skillMDURI = skillDir + "/SKILL.md"
	skillRun   = skillDir + "/scripts/run.sh"
	skillName  = "demo-skill"
	skillDesc  = "A demo skill served by the mcpvisor mock server."
	skillMD    = "---\nname: " + skillName + "\ndescription: " + skillDesc + "\n---\n# Demo skill\n\nRun scripts/run.sh.\n"
	skillRunSh = "#!/bin/sh\necho demo\n"
	dirMIME    = "inode/directory"
)

// skillFiles are the skill's files: URI → (MIME type, contents).
var skillFiles = map[string][2]string{
	skillMDURI: {"text/markdown", skillMD},
	skillRun:   {"text/x-shellscript", skillRunSh},
}

// skillResources are the skill's files as resources/list lists them.
func skillResources() []protocol.Resource {
	return []protocol.Resource{
		{URI: skillMDURI, Name: skillName, Description: skillDesc, MimeType: "text/markdown"},
		{URI: skillRun, Name: "run.sh", MimeType: "text/x-shellscript"},
	}
}

// skillEntry is the skill as skills/list and skills/get describe it.
func skillEntry() map[string]any {
	var files []map[string]any
	for _, uri := range []string{skillMDURI, skillRun} {
		sum := sha256.Sum256([]byte(skillFiles[uri][1]))
		files = append(files, map[string]any{"uri": uri, "digest": "sha256:" + hex.EncodeToString(sum[:]), "size": len(skillFiles[uri][1])})
	}
	return map[string]any{"uri": skillMDURI, "frontmatter": map[string]string{"name": skillName, "description": skillDesc}, "resources": files}
}

// skillsDispatch answers skills/list, skills/get,
// resources/directory/read and the reads of the skill's files; it
// reports false for anything else.
func (s *server) skillsDispatch(w mcpserver.ResponseWriter, r *mcpserver.Request) bool {
	var p struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(r.Params, &p)
	switch r.Method {
	case protocol.MethodSkillsList:
		w.Reply(map[string]any{"skills": []any{skillEntry()}})
	case protocol.MethodSkillsGet:
		if p.URI != skillMDURI {
			w.Error(protocol.NewError(protocol.CodeInvalidParams, "no skill %q", p.URI))
			return true
		}
		w.Reply(map[string]any{"skill": skillEntry()})
	case protocol.MethodResourcesDirectoryRead:
		var children []protocol.Resource
		switch strings.TrimSuffix(p.URI, "/") {
		case skillDir:
			children = []protocol.Resource{skillResources()[0], {URI: skillDir + "/scripts", Name: "scripts", MimeType: dirMIME}}
		case skillDir + "/scripts":
			children = []protocol.Resource{skillResources()[1]}
		default:
			w.Error(protocol.NewError(protocol.CodeInvalidParams, "%q is not a directory", p.URI))
			return true
		}
		w.Reply(map[string]any{"resources": children})
	case protocol.MethodResourcesRead:
		f, ok := skillFiles[p.URI]
		if !ok {
			return false
		}
		w.Reply(protocol.ReadResourceResult{Contents: []protocol.ResourceContents{{URI: p.URI, MimeType: f[0], Text: f[1]}}})
	default:
		return false
	}
	return true
}
