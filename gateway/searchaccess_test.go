package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/access"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// A caller's access rules hold through the search tools as through a
// direct call: search_tools names, finds and describe_tools describes
// only the servers the caller may use, call_tool refuses another
// server's tool typed, a call through call_tool costs the caller's rate
// limit one call, not two, and the rest of a cut result is read only by
// the caller whose call it was.
func TestSearchModeKeepsTheCallersAccessRules(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{
		"math":  {Config: mockserver.Command("-name", "math", "-tools", "10")},
		"files": {Config: mockserver.Command("-name", "files")},
	})
	cfg, err := access.Parse([]byte(`{"rules": [
	  {"match": {"subject": "alice"}, "servers": {"allow": ["math"]}, "rateLimit": {"perSecond": 1, "burst": 2}},
	  {"match": {"subject": "bob"}, "servers": {"allow": ["math"]}}
	]}`))
	require.NoError(t, err)
	policy, err := access.Compile(cfg)
	require.NoError(t, err)
	clk := &manualClock{now: time.Unix(1_000_000, 0)}
	g := gateway.New(sup, gateway.Options{ToolMode: gateway.ToolsSearch, Access: policy, AccessNow: clk.Now, MaxResultChars: 300})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx, 5*time.Millisecond) }()
	srv := httptest.NewServer(withIdentity(g.Handler(), gateway.Identity{Subject: "alice"}))
	other := httptest.NewServer(withIdentity(g.Handler(), gateway.Identity{Subject: "bob"}))
	t.Cleanup(func() {
		g.Close()
		srv.Close()
		other.Close()
		cancel()
		testwait.Done(t, done, "the gateway's Run to return")
	})
	host := searchHost(t, srv.URL, gateway.MCPSearchPath)
	call := testwait.Context(t)

	assert.Subset(t, names(host.Tools()), []string{"mcp__gw__search_tools", "mcp__gw__describe_tools", "mcp__gw__call_tool"},
		"the search tools are the gateway's own: a rule naming servers does not hide them")
	for _, tl := range host.Tools() {
		if tl.Name == "mcp__gw__search_tools" {
			assert.Contains(t, tl.Definition.Description, "\n- math (")
			assert.NotContains(t, tl.Definition.Description, "files", "the description names only the caller's servers")
		}
	}
	for _, h := range search(t, host, map[string]any{"query": "echo the text back"}) {
		assert.Equal(t, "math", h.Server, "only the servers the caller may use are searched: %s", h.Name)
	}

	res, err := host.CallTool(call, "mcp__gw__describe_tools", map[string]any{"names": []string{"math__echo", "files__echo"}})
	require.NoError(t, err)
	var defs []protocol.Tool
	require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &defs))
	require.Len(t, defs, 1)
	assert.Equal(t, "math__echo", defs[0].Name, "another server's tool is not described")

	// The burst is 2: one call through call_tool, then one refused for
	// access (a refusal takes no token), then one more call, then the
	// limit.
	res, err = host.CallTool(call, "mcp__gw__call_tool", map[string]any{"name": "math__echo", "arguments": map[string]any{"text": "one"}})
	require.NoError(t, err)
	assert.Contains(t, res.Content[0].Text, "one")
	_, err = host.CallTool(call, "mcp__gw__call_tool", map[string]any{"name": "files__echo", "arguments": map[string]any{"text": "no"}})
	var rpc *protocol.Error
	require.True(t, errors.As(err, &rpc), "%v", err)
	assert.EqualValues(t, gateway.CodeAccessDenied, rpc.Code, "%v", err)
	res, err = host.CallTool(call, "mcp__gw__call_tool", map[string]any{"name": "math__echo", "arguments": map[string]any{"text": "two"}})
	require.NoError(t, err, "the second call of a burst of 2: call_tool and the call it makes count once")
	assert.Contains(t, res.Content[0].Text, "two")
	_, err = host.CallTool(call, "mcp__gw__call_tool", map[string]any{"name": "math__echo", "arguments": map[string]any{"text": "three"}})
	require.True(t, errors.As(err, &rpc), "%v", err)
	assert.EqualValues(t, gateway.CodeRateLimited, rpc.Code, "%v", err)
	clk.Add(time.Second)
	_, err = host.CallTool(call, "mcp__gw__call_tool", map[string]any{"name": "math__echo", "arguments": map[string]any{"text": "four"}})
	require.NoError(t, err, "a second later the bucket has a token again")

	// A cut result's rest is the caller's own.
	clk.Add(time.Second)
	res, err = host.CallTool(call, "mcp__gw__call_tool", map[string]any{"name": "math__echo", "arguments": map[string]any{"text": strings.Repeat("long line of text\n", 60)}})
	require.NoError(t, err)
	handle := regexp.MustCompile(`"handle": "([0-9a-f]+)"`).FindStringSubmatch(res.Content[len(res.Content)-1].Text)
	require.Len(t, handle, 2, "the note gives a handle: %s", res.Content[len(res.Content)-1].Text)
	page := map[string]any{"handle": handle[1], "page": 1}
	res, err = host.CallTool(call, "mcp__gw__read_result_page", page)
	require.NoError(t, err)
	assert.False(t, res.IsError, "the caller reads its own result's rest")
	bobs := searchHost(t, other.URL, gateway.MCPSearchPath)
	res, err = bobs.CallTool(call, "mcp__gw__read_result_page", page)
	require.NoError(t, err)
	assert.True(t, res.IsError, "another caller with the handle reads nothing, though it may use the tool")
	assert.Contains(t, res.Content[0].Text, "No kept result has the handle")
}
