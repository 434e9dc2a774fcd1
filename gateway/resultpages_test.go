package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// bigText is n numbered lines of text.
func bigText(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "line %03d: the quick brown fox jumps over the lazy dog\n", i)
	}
	return b.String()
}

var handleRE = regexp.MustCompile(`read_result_page \{"handle": "([0-9a-f]+)", "page": 1\}; it has (\d+) pages?`)

// A result over the gateway's bound reaches the client cut at a line
// boundary with a note; the client reads the rest page by page with
// read_result_page and gets back exactly what was left out. A smaller
// bound the client asks for in _meta wins over the gateway's, and a
// server's own bound over both when smaller.
func TestResultFitsBound(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{
		"a": {Config: mockserver.Command("-name", "a")},
		"b": {Config: mockserver.Command("-name", "b")},
	})
	_, srv := serve(t, sup, gateway.Options{MaxResultChars: 2000, MaxResultCharsByServer: map[string]int{"b": 700}})
	host := downstream(t, srv.URL, "")
	ctx := testwait.Context(t)
	text := bigText(200) // 11,000 characters
	require.Contains(t, names(host.Tools()), "mcp__gw__read_result_page")

	for _, tc := range []struct {
		name  string
		tool  string
		meta  protocol.Meta
		bound int
	}{
		{"gateway bound", "mcp__gw__a__echo", nil, 2000},
		{"client asks less", "mcp__gw__a__echo", protocol.Meta{gateway.MetaMaxResultSizeChars: json.RawMessage(`1000`)}, 1000},
		{"client asks more", "mcp__gw__a__echo", protocol.Meta{gateway.MetaMaxResultSizeChars: json.RawMessage(`50000`)}, 2000},
		{"server bound", "mcp__gw__b__echo", protocol.Meta{gateway.MetaMaxResultSizeChars: json.RawMessage(`1000`)}, 700},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := host.CallToolWith(ctx, tc.tool, map[string]any{"text": text}, mcpvisor.CallOptions{Meta: tc.meta})
			require.NoError(t, err)
			require.Len(t, res.Content, 2, "the kept text, then the note")
			kept := res.Content[0].Text
			note := res.Content[1].Text
			assert.LessOrEqual(t, len(kept)+len(note), tc.bound, "the result with its note fits the bound")
			assert.Greater(t, len(kept), tc.bound/3, "the kept part uses the room")
			assert.True(t, strings.HasSuffix(kept, "\n"), "cut at a line boundary")
			assert.True(t, strings.HasPrefix(text, kept))
			assert.Contains(t, note, fmt.Sprintf("%d of its %d characters were left out", len(text)-len(kept), len(text)))
			m := handleRE.FindStringSubmatch(note)
			require.NotNil(t, m, note)
			var pages int
			fmt.Sscan(m[2], &pages)
			var rest strings.Builder
			for p := 1; p <= pages; p++ {
				pr, err := host.CallTool(ctx, "mcp__gw__read_result_page", map[string]any{"handle": m[1], "page": p})
				require.NoError(t, err)
				require.False(t, pr.IsError, "%+v", pr.Content)
				require.GreaterOrEqual(t, len(pr.Content), 2)
				for _, c := range pr.Content[:len(pr.Content)-1] {
					rest.WriteString(c.Text)
				}
				assert.Contains(t, pr.Content[len(pr.Content)-1].Text, fmt.Sprintf("page %d of %d", p, pages))
				assert.LessOrEqual(t, len(pr.Content[0].Text), tc.bound, "a page fits the bound")
			}
			assert.Equal(t, text[len(kept):], rest.String(), "the pages hold exactly what was left out")

			// A page past the end, and an unknown handle, are tool errors
			// the model can read.
			pr, err := host.CallTool(ctx, "mcp__gw__read_result_page", map[string]any{"handle": m[1], "page": pages + 1})
			require.NoError(t, err)
			assert.True(t, pr.IsError)
			pr, err = host.CallTool(ctx, "mcp__gw__read_result_page", map[string]any{"handle": "feedface", "page": 1})
			require.NoError(t, err)
			assert.True(t, pr.IsError)
			assert.Contains(t, pr.Content[0].Text, "expired")
		})
	}

	// A result within the bound is untouched.
	res, err := host.CallTool(ctx, "mcp__gw__a__echo", map[string]any{"text": "short"})
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	assert.Equal(t, "short", res.Content[0].Text)
}

// Without a bound of its own, the gateway honours the client's bound and
// does not list read_result_page (the note names it; it is callable).
func TestResultFitsClientBoundOnly(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	_, srv := serve(t, sup, gateway.Options{})
	host := downstream(t, srv.URL, "")
	ctx := testwait.Context(t)
	assert.NotContains(t, names(host.Tools()), "mcp__gw__read_result_page")
	text := bigText(100)
	res, err := host.CallToolWith(ctx, "mcp__gw__a__echo", map[string]any{"text": text},
		mcpvisor.CallOptions{Meta: protocol.Meta{gateway.MetaMaxResultSizeChars: json.RawMessage(`1500`)}})
	require.NoError(t, err)
	require.Len(t, res.Content, 2)
	assert.Less(t, len(res.Content[0].Text), 1500)
	res, err = host.CallToolWith(ctx, "mcp__gw__a__echo", map[string]any{"text": text}, mcpvisor.CallOptions{})
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	assert.Equal(t, text, res.Content[0].Text, "no bound: the whole result")
}

// A deferred server's tools are never listed (in full mode), yet stay
// callable by name; /status shows each server's tool definitions in
// estimated tokens, the pool's total, and which servers are deferred.
func TestDeferredServerAndTokens(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{
		"a":    {Config: mockserver.Command("-name", "a")},
		"lazy": {Config: mockserver.Command("-name", "lazy", "-tools", "20"), Defer: true},
	})
	g, srv := serve(t, sup, gateway.Options{})
	host := downstream(t, srv.URL, "")
	for _, n := range names(host.Tools()) {
		assert.NotContains(t, n, "lazy", "a deferred server's tool is listed")
	}
	assert.Contains(t, names(host.Tools()), "mcp__gw__a__echo")
	res, err := host.CallTool(testwait.Context(t), "mcp__gw__a__echo", map[string]any{"text": "x"})
	require.NoError(t, err)
	assert.Equal(t, "x", res.Content[0].Text)
	// Called by its downstream name, directly.
	direct := directCall(t, srv.URL, "lazy__tool_003", `{"text":"found"}`)
	assert.Contains(t, direct, `"found"`)

	rep := g.Status()
	byName := map[string]gateway.ServerReport{}
	for _, s := range rep.Servers {
		byName[s.Name] = s
	}
	assert.True(t, byName["lazy"].Deferred)
	assert.False(t, byName["a"].Deferred)
	var defs []protocol.Tool
	for _, tl := range sup.Tools() {
		if tl.Server == "a" {
			defs = append(defs, tl.Definition)
		}
	}
	assert.Equal(t, gateway.EstimateTokens(defs...), byName["a"].ToolTokens)
	assert.Greater(t, byName["lazy"].ToolTokens, byName["a"].ToolTokens, "20 more tools")
	assert.InDelta(t, byName["a"].ToolTokens+byName["lazy"].ToolTokens, rep.ToolTokens, 1)
	assert.Equal(t, "full", rep.ToolMode)

	resp, err := client.Get(srv.URL + "/status")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(body), `"toolTokens"`)
	assert.Contains(t, string(body), `"deferred": true`)
}

// statelessAt is a stateless-era client of the MCP endpoint at endpoint
// (a full URL, with any query): the client appends MCPPath to its URL,
// which the fragment keeps out of the request.
func statelessAt(t *testing.T, endpoint string) *statelessClient {
	return newStatelessClient(t, endpoint+"#", "{}")
}

// directCall calls the tool name with args (JSON) at the gateway's /mcp
// and returns the answer's encoding.
func directCall(t *testing.T, url, name, args string) string {
	t.Helper()
	a := statelessAt(t, url+gateway.MCPPath).call("tools/call", `{"name":"`+name+`","arguments":`+args+`}`)
	return a.raw
}
