package gateway

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The gateway's index follows the pool one server at a time: a tool the
// pool gains on one server re-indexes that server only, and is found by
// the next search even when no event has told the gateway yet (its Run
// is not running here: only the fingerprint can notice).
func TestSearchIndexIsIncremental(t *testing.T) {
	ctx := testwait.Context(t)
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(cctx))
	})
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"a": {Config: mockserver.Command("-name", "a", "-tools", "50")},
		"b": {Config: mockserver.Command("-name", "b")},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	g := New(sup, Options{ToolMode: ToolsSearch})
	t.Cleanup(g.Close)

	find := func(query string) []string {
		res, perr := g.search.search(t.Context(), nil, sup.Tools(), json.RawMessage(`{"query":"`+query+`"}`))
		require.Nil(t, perr)
		text := res.(*protocol.CallToolResult).Content[0].Text
		var hits []searchHit
		if json.Unmarshal([]byte(text), &hits) != nil {
			return nil
		}
		var names []string
		for _, h := range hits {
			names = append(names, h.Name)
		}
		return names
	}
	require.NotEmpty(t, find("add numbers"))
	si := g.search.index
	assert.Equal(t, map[string]int{"a": 1, "b": 1}, si.reindexed)
	require.NotEmpty(t, find("echo"))
	assert.Equal(t, map[string]int{"a": 1, "b": 1}, si.reindexed, "nothing changed: nothing indexed again")

	_, err = sup.CallTool(ctx, "mcp__b__announce", map[string]any{"text": "quokka_counter"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return slices.Contains(toolNames(sup.Tools()), "mcp__b__quokka_counter") }, 20*time.Second, 5*time.Millisecond)
	assert.Contains(t, find("quokka counter"), "b__quokka_counter")
	assert.Equal(t, map[string]int{"a": 1, "b": 2}, si.reindexed, "only the server that changed")

	// An event marks a server stale: it alone is indexed again.
	g.search.poolChanged("a")
	find("echo")
	assert.Equal(t, map[string]int{"a": 2, "b": 2}, si.reindexed)
}

func toolNames(tools []mcpvisor.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}
