package mcpvisor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/toolcache"
)

// searchNames are the qualified names SearchTools returns for query.
func searchNames(t *testing.T, s *Supervisor, query string, o SearchOptions) []string {
	t.Helper()
	matches, err := s.SearchTools(t.Context(), query, o)
	require.NoError(t, err)
	names := make([]string, len(matches))
	for i, m := range matches {
		names[i] = m.Tool.Name
	}
	return names
}

// reindexed is how many times each server was indexed (SetServer).
func reindexed(s *Supervisor) map[string]int {
	s.search.mu.Lock()
	defer s.search.mu.Unlock()
	out := make(map[string]int, len(s.search.indexed))
	for k, v := range s.search.indexed {
		out[k] = v
	}
	return out
}

// waitForTool waits until the pool has name.
func waitForTool(t *testing.T, s *Supervisor, name string) {
	t.Helper()
	require.Eventually(t, func() bool { _, ok := toolNamed(s, name); return ok },
		20*time.Second, 5*time.Millisecond, "%s reaches the pool", name)
}

// A tool a server adds at run time (list_changed) is found by the first
// search after the pool has it, and re-indexing it touches that server
// alone: the other servers' tools are not indexed again. (Rebuilding the
// whole index on every pool change makes the counts of b and c grow and
// fails this test.)
func TestSearchToolsFollowsListChangedOneServerAtATime(t *testing.T) {
	ctx := t.Context()
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"a": mock("-name", "a"), "b": mock("-name", "b"), "c": mock("-name", "c")})

	assert.Contains(t, searchNames(t, s, "echo text back", SearchOptions{Limit: 10}), "mcp__a__echo")
	assert.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1}, reindexed(s), "the first search indexes each server once")
	searchNames(t, s, "echo", SearchOptions{})
	assert.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1}, reindexed(s), "an unchanged pool re-indexes nothing")

	_, err := s.CallTool(ctx, "mcp__a__announce", map[string]any{"text": "reticulate_splines"})
	require.NoError(t, err)
	waitForTool(t, s, "mcp__a__reticulate_splines")
	got := searchNames(t, s, "reticulate the splines", SearchOptions{Limit: 3})
	require.NotEmpty(t, got, "the announced tool is found by the first search after the pool has it")
	assert.Equal(t, "mcp__a__reticulate_splines", got[0])
	assert.Equal(t, map[string]int{"a": 2, "b": 1, "c": 1}, reindexed(s), "only the server whose list changed is indexed again")

	// A removed server's tools go.
	setAndSettle(t, s, map[string]ServerConfig{"a": mock("-name", "a"), "c": mock("-name", "c")})
	for _, n := range searchNames(t, s, "echo text back", SearchOptions{Limit: 50}) {
		assert.False(t, strings.HasPrefix(n, "mcp__b__"), "removed server's tool %s found", n)
	}
	assert.Equal(t, 1, reindexed(s)["c"], "removing b re-indexes no one else")
}

// A lazy server's tools, known from the discovery cache, are found before
// it ever starts; calling the match starts it.
func TestSearchToolsFindsALazyServersCachedToolsBeforeItStarts(t *testing.T) {
	ctx := t.Context()
	cache := toolcache.New(t.TempDir(), nil)
	opts := testOptions
	opts.DiscoveryCache = cache
	cfg := mock("-name", "lz")
	cfg.Lazy = true
	// Its last run listed echo, described in words no other tool uses.
	require.NoError(t, cache.Store("lz", ConfigHash(cfg), []protocol.Tool{
		{Name: "echo", Description: "Repeats back whatever words you give it.", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
	}))
	s := start(t, opts)
	setAndSettle(t, s, map[string]ServerConfig{"lz": cfg, "other": mock("-name", "other")})

	matches, err := s.SearchTools(ctx, "repeat my words", SearchOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, matches)
	assert.Equal(t, "mcp__lz__echo", matches[0].Tool.Name, "the cached tool is found")
	assert.Equal(t, "Repeats back whatever words you give it.", matches[0].Summary)
	assert.Equal(t, StatePending, statusOf(s, "lz").State, "searching starts nothing")

	res, err := s.CallTool(ctx, matches[0].Tool.Name, map[string]any{"text": "hello"})
	require.NoError(t, err, "a call to the match starts the server")
	assert.Equal(t, "hello", res.Content[0].Text)
	assert.Equal(t, StateReady, statusOf(s, "lz").State)
}

// A tool a permission rule denies, or the server's Tools filter drops, is
// never found, and not described.
func TestSearchToolsNeverFindsADeniedTool(t *testing.T) {
	s := start(t, testOptions)
	cfg := mock("-name", "m")
	cfg.Tools = ToolFilter{Deny: []string{"add"}}
	setAndSettle(t, s, map[string]ServerConfig{"m": cfg})

	assert.Contains(t, searchNames(t, s, "echo text", SearchOptions{}), "mcp__m__echo", "found while allowed")
	require.NoError(t, s.SetPermissions(PermissionRules{Deny: []string{"mcp__*__echo"}}))
	for _, q := range []string{"echo text", "echoes its text argument back", "echo"} {
		assert.NotContains(t, searchNames(t, s, q, SearchOptions{Limit: 50}), "mcp__m__echo", "%q finds a denied tool", q)
	}
	_, err := s.DescribeTool("mcp__m__echo")
	assert.ErrorIs(t, err, ErrCallDenied)
	assert.NotContains(t, searchNames(t, s, "adds two numbers", SearchOptions{Limit: 50}), "mcp__m__add", "the Tools filter's dropped tool is found")
	_, err = s.DescribeTool("mcp__m__add")
	assert.ErrorIs(t, err, ErrUnknownTool)

	// The caller's own Allow narrows further.
	got := searchNames(t, s, "sleep milliseconds", SearchOptions{Allow: func(name string) bool { return name != "mcp__m__sleep" }})
	assert.NotContains(t, got, "mcp__m__sleep")
	assert.Contains(t, searchNames(t, s, "sleep milliseconds", SearchOptions{}), "mcp__m__sleep")
}

// A deferred server's tools are found by search (that is what they are
// for), marked Deferred; the server and read-only filters apply.
func TestSearchToolsFindsADeferredServersTools(t *testing.T) {
	s := start(t, testOptions)
	d := mock("-name", "d")
	d.Defer = true
	setAndSettle(t, s, map[string]ServerConfig{"d": d, "n": mock("-name", "n")})

	matches, err := s.SearchTools(t.Context(), "echo text", SearchOptions{Servers: []string{"d"}})
	require.NoError(t, err)
	require.NotEmpty(t, matches)
	for _, m := range matches {
		assert.Equal(t, "d", m.Tool.Server)
		assert.True(t, m.Tool.Deferred, "%s is a deferred server's", m.Tool.Name)
	}
	assert.Equal(t, "mcp__d__echo", matches[0].Tool.Name)

	ro := searchNames(t, s, "echo text add numbers", SearchOptions{ReadOnly: true, Limit: 50})
	assert.ElementsMatch(t, []string{"mcp__d__echo", "mcp__n__echo"}, ro, "only echo is annotated read-only")
}

// DescribeTool gives the full definition: the description the pool caps,
// the whole inputSchema; an unknown name is ErrUnknownTool.
func TestDescribeToolReturnsTheFullDefinition(t *testing.T) {
	opts := testOptions
	opts.MaxDescriptionLength = 12
	s := start(t, opts)
	setAndSettle(t, s, map[string]ServerConfig{"m": mock("-name", "m")})

	pooled, ok := toolNamed(s, "mcp__m__echo")
	require.True(t, ok)
	assert.Less(t, len(pooled.Definition.Description), len("Echoes its text argument back."), "the pool caps it")

	full, err := s.DescribeTool("mcp__m__echo")
	require.NoError(t, err)
	assert.Equal(t, "mcp__m__echo", full.Name)
	assert.Equal(t, "m", full.Server)
	assert.Equal(t, "Echoes its text argument back.", full.Definition.Description)
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	require.NoError(t, json.Unmarshal(full.Definition.InputSchema, &schema))
	assert.Contains(t, schema.Properties, "text")
	assert.Equal(t, []string{"text"}, schema.Required)

	matches, err := s.SearchTools(t.Context(), "echo", SearchOptions{Limit: 1})
	require.NoError(t, err)
	require.Len(t, matches, 1)
	assert.Equal(t, "Echoes its text argument back.", matches[0].Tool.Definition.Description, "a match carries the full definition too")

	_, err = s.DescribeTool("mcp__m__nope")
	assert.ErrorIs(t, err, ErrUnknownTool)
}

// A successful call of a tool a recent search returned teaches the index:
// the same kind of request ranks that tool higher afterwards.
func TestSearchToolsLearnsFromTheToolCalledAfterASearch(t *testing.T) {
	ctx := t.Context()
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"m": mock("-name", "m")})

	const query = "add text"
	before := searchNames(t, s, query, SearchOptions{})
	require.NotEmpty(t, before)
	require.NotEqual(t, "mcp__m__echo", before[0], "the test needs echo not first at the start")
	require.Contains(t, before, "mcp__m__echo")

	_, err := s.CallTool(ctx, "mcp__m__echo", map[string]any{"text": "hi"})
	require.NoError(t, err)
	after := searchNames(t, s, query, SearchOptions{})
	assert.Equal(t, "mcp__m__echo", after[0], "called after the search, echo now ranks first (was %q)", before)

	// A call of a tool no search returned teaches nothing.
	other := searchNames(t, s, "sleep milliseconds", SearchOptions{})
	_, err = s.CallTool(ctx, "mcp__m__add", map[string]any{"a": 1, "b": 2})
	require.NoError(t, err)
	assert.Equal(t, other, searchNames(t, s, "sleep milliseconds", SearchOptions{}))
}

func TestSearchToolsAfterClose(t *testing.T) {
	s, err := Start(context.Background(), testOptions)
	require.NoError(t, err)
	require.NoError(t, s.Close(context.Background()))
	_, err = s.SearchTools(context.Background(), "echo", SearchOptions{})
	assert.ErrorIs(t, err, ErrClosed)
}

func TestSearchToolsSummaryKeepsTheFirstSentence(t *testing.T) {
	assert.Equal(t, "Reads a file.", summarize("Reads a file. Returns its bytes."))
	assert.Equal(t, "First line", summarize("First line\nsecond line"))
	assert.Equal(t, "Version 1.2 is fine", summarize("Version 1.2 is fine"))
	long := summarize(strings.Repeat("word ", 100))
	assert.LessOrEqual(t, len(long), summaryLength+len("…"))
	assert.True(t, strings.HasSuffix(long, "…"))
}
