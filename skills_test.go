package mcpvisor_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/httppeer"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

const (
	skillURI = "skill://pdf-processing/SKILL.md"
	formsURI = "skill://pdf-processing/references/FORMS.md"
	skillMD  = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nmetadata:\n  version: 2.1\n---\n\nSee references/FORMS.md.\n"
	formsMD  = "Supporting content.\n"
)

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// skillServer serves the skills extension in front of the mock: a
// catalogue of one skill (two files), whose SKILL.md it may serve
// tampered with, a dynamic skill, and an invalid entry; it records the
// skill files read.
type skillServer struct {
	peer *httppeer.Peer

	mu     sync.Mutex
	served string // the SKILL.md served (skillMD unless tampered with)
	entry  string // frontmatter of the entry (JSON)
	reads  []string
}

func newSkillServer(t *testing.T, extension bool) *skillServer {
	s := &skillServer{peer: httppeer.New(t, mockserver.Options{}), served: skillMD,
		entry: `{"name":"pdf-processing","description":"Extract, fill, and assemble PDF documents","metadata":{"version":2.1}}`}
	s.peer.SetHook(func(w http.ResponseWriter, p httppeer.Post) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch p.Msg.Method {
		case protocol.MethodDiscover:
			ext := ""
			if extension {
				ext = `,"extensions":{"io.modelcontextprotocol/skills":{}}`
			}
			httppeer.Result(w, p, `{"resultType":"complete","ttlMs":0,"cacheScope":"private","supportedVersions":["2026-07-28"],`+
				`"capabilities":{"tools":{},"resources":{}`+ext+`},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"skills","version":"1"}}}`)
			return true
		case protocol.MethodSkillsList:
			httppeer.Result(w, p, fmt.Sprintf(`{"resultType":"complete","ttlMs":0,"cacheScope":"private","skills":[
				{"uri":%q,"frontmatter":%s,"resources":[{"uri":%q,"digest":%q,"size":%d},{"uri":%q,"digest":%q,"size":%d}]},
				{"uri":"skill://daily/SKILL.md","frontmatter":{"name":"daily","description":"d"},"resources":"dynamic"},
				{"uri":"skill://broken/SKILL.md","frontmatter":{"name":"broken","description":"b"}}]}`,
				skillURI, s.entry, skillURI, digest(skillMD), len(skillMD), formsURI, digest(formsMD), len(formsMD)))
			return true
		case protocol.MethodSkillsGet:
			var params struct{ URI string }
			_ = json.Unmarshal(p.Msg.Params, &params)
			if params.URI != skillURI {
				httppeer.Error(w, p, http.StatusOK, protocol.CodeInvalidParams, "no such skill", "")
				return true
			}
			httppeer.Result(w, p, fmt.Sprintf(`{"resultType":"complete","ttlMs":0,"cacheScope":"private","skill":
				{"uri":%q,"frontmatter":%s,"resources":[{"uri":%q,"digest":%q,"size":%d}]}}`, skillURI, s.entry, skillURI, digest(skillMD), len(skillMD)))
			return true
		case protocol.MethodResourcesRead:
			var params struct{ URI string }
			_ = json.Unmarshal(p.Msg.Params, &params)
			text := map[string]string{skillURI: s.served, formsURI: formsMD,
				"skill://daily/SKILL.md": "---\nname: daily\ndescription: d\n---\nToday.\n"}[params.URI]
			s.reads = append(s.reads, params.URI)
			body, _ := json.Marshal(map[string]any{"resultType": "complete", "contents": []map[string]string{{"uri": params.URI, "text": text}}})
			httppeer.Result(w, p, string(body))
			return true
		}
		return false
	})
	return s
}

func (s *skillServer) set(served, entry string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served = served
	if entry != "" {
		s.entry = entry
	}
}

func (s *skillServer) fileReads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reads...)
}

func startWith(t *testing.T, url string) *mcpvisor.Supervisor {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sup.Close(ctx)
	})
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{"s": {Config: transports.Config{Type: transports.TypeHTTP, URL: url}}})
	require.NoError(t, err)
	require.NoError(t, sup.WaitSettled(ctx))
	require.Equal(t, mcpvisor.StateReady, sup.Status()[0].State, "%v", sup.Status()[0].LastError)
	return sup
}

func TestSkillsAreListedWithoutReadingThem(t *testing.T) {
	srv := newSkillServer(t, true)
	sup := startWith(t, srv.peer.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	skills, err := sup.Skills().List(ctx, "s")
	require.NoError(t, err)
	require.Len(t, skills, 2, "the entry without resources is left out, the others kept")
	assert.Equal(t, skillURI, skills[0].URI)
	assert.Equal(t, "pdf-processing", skills[0].Name())
	assert.Len(t, skills[0].Resources.Files, 2)
	assert.True(t, skills[1].Resources.Dynamic)
	assert.Empty(t, srv.fileReads(), "no skill file is read ahead of need: not on connect, not on listing")

	entry, err := sup.Skills().Get(ctx, "s", skillURI)
	require.NoError(t, err)
	assert.Equal(t, skillURI, entry.URI)
	assert.Len(t, entry.Resources.Files, 1)
	_, err = sup.Skills().Get(ctx, "s", "skill://none/SKILL.md")
	var rpcErr *protocol.Error
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, int64(protocol.CodeInvalidParams), rpcErr.Code)
	assert.Empty(t, srv.fileReads())
}

func TestLoadSkillVerifiesAndReadsOnlyListedFiles(t *testing.T) {
	srv := newSkillServer(t, true)
	sup := startWith(t, srv.peer.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	skills, err := sup.Skills().List(ctx, "s")
	require.NoError(t, err)

	loaded, err := sup.Skills().Load(ctx, "s", skills[0])
	require.NoError(t, err)
	assert.Equal(t, skillMD, string(loaded.Content))
	assert.Equal(t, "skill://pdf-processing", loaded.Root())
	assert.Equal(t, []string{skillURI}, srv.fileReads(), "loading reads the SKILL.md alone")

	forms, err := loaded.ReadFile(ctx, "references/FORMS.md")
	require.NoError(t, err)
	assert.Equal(t, formsMD, string(forms))

	for _, ref := range []string{"references/OTHER.md", "../other/SKILL.md", "skill://elsewhere/SKILL.md"} {
		_, err = loaded.ReadFile(ctx, ref)
		assert.ErrorIs(t, err, mcpvisor.ErrSkillVerification, ref)
	}
	assert.Equal(t, []string{skillURI, formsURI}, srv.fileReads(), "unlisted files are refused unread")

	dynamic, err := sup.Skills().Load(ctx, "s", skills[1])
	require.NoError(t, err, "a dynamic skill has no digests; its frontmatter is still compared")
	assert.Contains(t, string(dynamic.Content), "Today.")
}

// The three failures of the conformance suite's sep-2640-client-verify-*
// scenarios: a body that is not what the digest covers, a size that
// differs, and a frontmatter that differs from the entry's (with a digest
// that matches). None loads.
func TestTamperedSkillsAreNotLoaded(t *testing.T) {
	for name, tc := range map[string]struct{ served, entry string }{
		"digest":      {skillMD[:len(skillMD)-4] + "EVIL", ""},
		"size":        {skillMD + "extra bytes\n", ""},
		"frontmatter": {"", `{"name":"pdf-processing","description":"Exfiltrate credentials","metadata":{"version":2.1}}`},
		"extra field": {"", `{"name":"pdf-processing","description":"Extract, fill, and assemble PDF documents"}`},
	} {
		t.Run(name, func(t *testing.T) {
			srv := newSkillServer(t, true)
			if tc.served != "" {
				srv.set(tc.served, "")
			} else {
				srv.set(skillMD, tc.entry)
			}
			sup := startWith(t, srv.peer.URL())
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			skills, err := sup.Skills().List(ctx, "s")
			require.NoError(t, err)
			loaded, err := sup.Skills().Load(ctx, "s", skills[0])
			require.ErrorIs(t, err, mcpvisor.ErrSkillVerification)
			assert.Nil(t, loaded)
			var ve *mcpvisor.SkillVerificationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, skillURI, ve.URI)
			assert.Equal(t, []string{skillURI}, srv.fileReads())
		})
	}
}

func TestServerWithoutTheSkillsExtension(t *testing.T) {
	srv := newSkillServer(t, false)
	sup := startWith(t, srv.peer.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := sup.Skills().List(ctx, "s")
	assert.ErrorIs(t, err, mcpvisor.ErrNoSkills)
	assert.NotContains(t, srv.peer.Methods(), protocol.MethodSkillsList, "not asked without the declaration")
}
