package gateway_test

import (
	"encoding/json"
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
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// modelToolName is what model APIs accept as a tool name; they refuse a
// whole request that carries a longer one.
var modelToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// A host that adds its own prefix (as Claude Code adds mcp__<server>__;
// a mcpvisor host adds the same) sees every gateway tool under a name a
// model API takes: the gateway offers <server>__<tool>, and cuts a name
// longer than 48 characters to 48 with a hash that is the same in every
// gateway over the same pool and names the original in _meta. A call by
// the short name, and by the pool's own name, reaches the tool.
func TestGatewayNamesFitBehindAClientPrefix(t *testing.T) {
	const long = "a-server-whose-name-is-forty-chars-long" // 39 characters
	sup := upstream(t, map[string]mcpvisor.ServerConfig{
		long: {Config: mockserver.Command("-name", "long")},
		"b":  {Config: mockserver.Command("-name", "b")},
	})
	_, srv := serve(t, sup, gateway.Options{})
	host := downstream(t, srv.URL, "")

	var cut *mcpvisor.Tool
	for _, tool := range host.Tools() {
		assert.Regexp(t, modelToolName, tool.Name, "behind the host's prefix")
		if tool.Server != "gw" {
			continue
		}
		downstream := tool.Definition.Name
		assert.LessOrEqual(t, len(downstream), gateway.DefaultNameBudget, downstream)
		assert.False(t, strings.HasPrefix(downstream, "mcp__"), "the gateway's own mcp__ is redundant behind the host's: %s", downstream)
		if regexp.MustCompile(`__announce_[0-9a-f]{8}$`).MatchString(downstream) {
			cut = &tool
		}
	}
	require.NotNil(t, cut, "the long server's announce tool (%d characters in full) is offered cut", len(long+"__announce"))
	assert.Regexp(t, `^`+long[:29]+`__announce_[0-9a-f]{8}$`, cut.Definition.Name, "the server's part is cut, the tool's kept")
	var original struct{ Server, Name string }
	require.NoError(t, json.Unmarshal(cut.Definition.Meta[gateway.MetaOriginalName], &original))
	assert.Equal(t, long, original.Server)
	assert.Equal(t, "announce", original.Name)

	// The cut name calls the tool.
	res, err := host.CallTool(testwait.Context(t), cut.Name, map[string]any{"text": "late"})
	require.NoError(t, err)
	assert.Contains(t, res.Content[0].Text, "announced late")

	// A second gateway over the same pool offers the same names.
	_, srv2 := serve(t, sup, gateway.Options{})
	host2 := downstream(t, srv2.URL, "")
	// The announce added a tool, and each host learns of it by its own
	// list_changed; once both have, they name every tool alike.
	late := func(tools []mcpvisor.Tool) bool {
		for _, n := range names(tools) {
			if strings.HasSuffix(n, "__late") {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool { return late(host.Tools()) && late(host2.Tools()) },
		10*time.Second, 20*time.Millisecond, "both hosts learn of the announced tool")
	assert.ElementsMatch(t, names(host.Tools()), names(host2.Tools()))

	// The pool's own name still calls the tool (hosts set up before the
	// default changed).
	c := &rawClient{t: t, url: srv.URL}
	c.initialize()
	_, body := c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__b__echo","arguments":{"text":"by pool name"}}}`)
	assert.Contains(t, body, "by pool name")
	_, body = c.post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"b__echo","arguments":{"text":"by short name"}}}`)
	assert.Contains(t, body, "by short name")
}

// NameBudget bounds every name; NamesQualified offers the pool's names.
func TestGatewayNameStyles(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{
		"server-one": {Config: mockserver.Command("-name", "one", "-conformance")},
		"server-two": {Config: mockserver.Command("-name", "two", "-conformance")},
	})
	list := func(opts gateway.Options) []string {
		_, srv := serve(t, sup, opts)
		c := &rawClient{t: t, url: srv.URL}
		c.initialize()
		_, body := c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		var resp struct {
			Result struct {
				Tools []struct{ Name string } `json:"tools"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &resp), body)
		var out []string
		for _, tool := range resp.Result.Tools {
			out = append(out, tool.Name)
		}
		return out
	}

	tight := list(gateway.Options{NameBudget: 20})
	seen := map[string]bool{}
	for _, n := range tight {
		if n == "wait_for_channel_message" {
			continue // the gateway's own tool
		}
		assert.LessOrEqual(t, len(n), 20, n)
		assert.False(t, seen[n], "%s offered twice", n)
		seen[n] = true
	}
	assert.Contains(t, tight, "server-one__echo", "a name that fits is not cut")
	assert.Equal(t, len(list(gateway.Options{})), len(tight), "every tool is offered, however tight the budget")

	qualified := list(gateway.Options{Names: gateway.NamesQualified})
	assert.Contains(t, qualified, "mcp__server-one__echo")
	assert.Contains(t, qualified, "mcp__server-two__echo")
}

// A tool the pool gained is listed under its short name even before the
// gateway has seen the pool's change event (the pool is published first;
// in a cluster the event comes from another member): here the gateway's
// Run never runs, so no event ever reaches it.
func TestGatewayNamesAToolAddedBeforeItsEvent(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	g := gateway.New(sup, gateway.Options{})
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { g.Close(); srv.Close() })
	c := &rawClient{t: t, url: srv.URL}
	c.initialize()
	_, body := c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	require.Contains(t, body, `"a__echo"`)

	_, err := sup.CallTool(testwait.Context(t), "mcp__a__announce", map[string]any{"text": "late"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		for _, tool := range sup.Tools() {
			if tool.Name == "mcp__a__late" {
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "the pool to gain the announced tool")
	_, body = c.post(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	assert.Contains(t, body, `"a__late"`)
	assert.NotContains(t, body, `"mcp__a__late"`)
	_, body = c.post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a__announce","arguments":{"text":"again"}}}`)
	assert.Contains(t, body, "announced again", "a call by the short name of a tool of the old index")
}
