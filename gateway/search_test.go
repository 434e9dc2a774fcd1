package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// searchHost connects a supervisor, as a host would, to the gateway's MCP
// endpoint at path (with any query).
func searchHost(t *testing.T, url, path string) *mcpvisor.Supervisor {
	t.Helper()
	return upstream(t, map[string]mcpvisor.ServerConfig{"gw": {Config: transports.Config{Type: "http", URL: url + path}}})
}

type foundTool struct {
	Name, Server, Description, Arguments string
}

// search calls search_tools through host and returns the hits.
func search(t *testing.T, host *mcpvisor.Supervisor, args map[string]any) []foundTool {
	t.Helper()
	res, err := host.CallTool(testwait.Context(t), "mcp__gw__search_tools", args)
	require.NoError(t, err)
	require.NotEmpty(t, res.Content)
	var hits []foundTool
	if strings.HasPrefix(res.Content[0].Text, "No tool matches") {
		return nil
	}
	require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &hits), res.Content[0].Text)
	return hits
}

func hitNames(hits []foundTool) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Name)
	}
	return out
}

// A client at /mcp/search lists the search tools instead of the pool; it
// finds a tool it never listed, reads its definition and calls it through
// call_tool. A denied tool is never found, described nor callable; a tool
// the pool gains (announce) is found by the first search after; the
// search tool's description names the servers.
func TestSearchModeFindsAndCalls(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{
		"math":  {Config: mockserver.Command("-name", "math", "-tools", "30", "-instructions", "Arithmetic on numbers.\nMore lines.")},
		"files": {Config: mockserver.Command("-name", "files")},
	})
	_, srv := serve(t, sup, gateway.Options{Deny: []string{"mcp__files__add"}, AlwaysOffer: []string{"files__echo"}})
	host := searchHost(t, srv.URL, gateway.MCPSearchPath)
	ctx := testwait.Context(t)

	listed := names(host.Tools())
	assert.ElementsMatch(t, []string{"mcp__gw__search_tools", "mcp__gw__describe_tools", "mcp__gw__call_tool",
		"mcp__gw__files__echo", "mcp__gw__wait_for_channel_message"}, listed)
	var desc string
	for _, tl := range host.Tools() {
		if tl.Name == "mcp__gw__search_tools" {
			desc = tl.Definition.Description
		}
	}
	assert.Contains(t, desc, "- math (35 tools): Arithmetic on numbers.", "a server's purpose: the first line of its instructions")
	assert.NotContains(t, desc, "More lines")
	assert.Contains(t, desc, "- files (4 tools): announce, echo, fail, sleep\n", "the denied tool is not counted; a server without a title or instructions is described by its tools' names")

	hits := search(t, host, map[string]any{"query": "add two numbers"})
	require.NotEmpty(t, hits)
	assert.Equal(t, "math__add", hits[0].Name)
	assert.Equal(t, "math", hits[0].Server)
	assert.Contains(t, hits[0].Arguments, "a*: number")
	assert.NotContains(t, hitNames(hits), "files__add", "a denied tool is never found")

	res, err := host.CallTool(ctx, "mcp__gw__describe_tools", map[string]any{"names": []string{"math__add", "files__add"}})
	require.NoError(t, err)
	var defs []protocol.Tool
	require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &defs))
	require.Len(t, defs, 1)
	assert.Equal(t, "math__add", defs[0].Name)
	assert.Contains(t, string(defs[0].InputSchema), `"b"`)
	require.Len(t, res.Content, 2)
	assert.Contains(t, res.Content[1].Text, "files__add")

	res, err = host.CallTool(ctx, "mcp__gw__call_tool", map[string]any{"name": "math__add", "arguments": map[string]any{"a": 2, "b": 40}})
	require.NoError(t, err)
	assert.Equal(t, "42", res.Content[0].Text)
	assert.JSONEq(t, `{"sum":42}`, string(res.StructuredContent))

	// The denied tool is not callable through call_tool either: the
	// direct call's error.
	_, err = host.CallTool(ctx, "mcp__gw__call_tool", map[string]any{"name": "files__add", "arguments": map[string]any{"a": 1, "b": 1}})
	var perr *protocol.Error
	require.ErrorAs(t, err, &perr)
	assert.EqualValues(t, protocol.CodeInvalidParams, perr.Code)
	assert.Contains(t, perr.Message, "unknown tool")
	// Nor is an unknown one.
	_, err = host.CallTool(ctx, "mcp__gw__call_tool", map[string]any{"name": "nope", "arguments": map[string]any{}})
	require.ErrorAs(t, err, &perr)

	// A tool added at run time is found by the first search once the
	// pool has it.
	_, err = host.CallTool(ctx, "mcp__gw__call_tool", map[string]any{"name": "files__announce", "arguments": map[string]any{"text": "zebra_striper"}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return slices.Contains(names(sup.Tools()), "mcp__files__zebra_striper") }, 20*time.Second, 5*time.Millisecond)
	hits = search(t, host, map[string]any{"query": "zebra striper"})
	require.NotEmpty(t, hits)
	assert.Equal(t, "files__zebra_striper", hits[0].Name)
	// The search-mode client got list_changed: its search tool's
	// description counts the new tool.
	require.Eventually(t, func() bool {
		for _, tl := range host.Tools() {
			if tl.Name == "mcp__gw__search_tools" {
				return strings.Contains(tl.Definition.Description, "- files (5 tools)")
			}
		}
		return false
	}, 20*time.Second, 5*time.Millisecond, "the search-mode client re-lists after list_changed")

	// Filters: a server, read-only tools.
	hits = search(t, host, map[string]any{"query": "echo text back", "server": "files"})
	require.NotEmpty(t, hits)
	for _, h := range hits {
		assert.Equal(t, "files", h.Server)
	}
	hits = search(t, host, map[string]any{"query": "echo", "read_only": true})
	require.NotEmpty(t, hits)
	for _, h := range hits {
		assert.True(t, strings.HasSuffix(h.Name, "__echo"), h.Name)
	}
}

// A client chooses its mode: /mcp/full lists the pool whatever the
// gateway's mode, /mcp?tools=search the search tools; /mcp follows the
// gateway's ToolMode; a bad value is refused with 400.
func TestSearchModePerClient(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	_, srv := serve(t, sup, gateway.Options{ToolMode: gateway.ToolsSearch})
	full := names(searchHost(t, srv.URL, gateway.MCPFullPath).Tools())
	assert.Contains(t, full, "mcp__gw__a__echo")
	assert.NotContains(t, full, "mcp__gw__search_tools")
	byDefault := names(searchHost(t, srv.URL, gateway.MCPPath).Tools())
	assert.NotContains(t, byDefault, "mcp__gw__a__echo")
	assert.Contains(t, byDefault, "mcp__gw__search_tools")
	param := names(searchHost(t, srv.URL, gateway.MCPPath+"?tools=full").Tools())
	assert.Contains(t, param, "mcp__gw__a__echo")

	_, srv2 := serve(t, sup, gateway.Options{})
	assert.Contains(t, names(searchHost(t, srv2.URL, gateway.MCPPath).Tools()), "mcp__gw__a__echo")
	assert.Contains(t, names(searchHost(t, srv2.URL, gateway.MCPPath+"?tools=search").Tools()), "mcp__gw__search_tools")
	assert.NotContains(t, names(searchHost(t, srv2.URL, gateway.MCPPath+"?tools=search").Tools()), "mcp__gw__a__echo")

	resp, err := client.Post(srv2.URL+gateway.MCPPath+"?tools=some", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)

	// The per-mode endpoints are the MCP endpoint: behind the token.
	_, srv3 := serve(t, sup, gateway.Options{Token: "s3cret"})
	for _, path := range []string{gateway.MCPSearchPath, gateway.MCPFullPath, gateway.MCPPath + "?tools=search"} {
		resp, err := client.Post(srv3.URL+path, "application/json", strings.NewReader(`{}`))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
	}

	// In full mode the search tools are not callable (not offered).
	a := statelessAt(t, srv2.URL+gateway.MCPPath).call("tools/call", `{"name":"search_tools","arguments":{"query":"echo"}}`)
	assert.NotNil(t, a.msg.Error, a.raw)
}

// ToolsAuto searches once the definitions the full list would hold
// exceed the budget, and lists the pool below it.
func TestSearchModeAutoBudget(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a", "-tools", "40")}})
	var full int
	for _, tl := range sup.Tools() {
		full += gateway.EstimateTokens(tl.Definition)
	}
	g, srv := serve(t, sup, gateway.Options{ToolMode: gateway.ToolsAuto, SearchBudgetTokens: full - 1})
	assert.Contains(t, names(searchHost(t, srv.URL, gateway.MCPPath).Tools()), "mcp__gw__search_tools")
	assert.Equal(t, "search", g.Status().ToolMode)
	g2, srv2 := serve(t, sup, gateway.Options{ToolMode: gateway.ToolsAuto, SearchBudgetTokens: full})
	assert.Contains(t, names(searchHost(t, srv2.URL, gateway.MCPPath).Tools()), "mcp__gw__a__tool_040")
	assert.Equal(t, "full", g2.Status().ToolMode)
}

// A deferred server's tools are never listed, in either mode; in full
// mode the search tools are listed beside the pool while such a server
// has tools, and find them.
func TestSearchModeDeferredServer(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{
		"a":    {Config: mockserver.Command("-name", "a")},
		"lazy": {Config: mockserver.Command("-name", "lazy", "-tools", "5", "-describe", "tool_004=Converts a temperature from celsius to fahrenheit"), Defer: true},
	})
	_, srv := serve(t, sup, gateway.Options{AlwaysOffer: []string{"*__tool_00*"}})
	for _, path := range []string{gateway.MCPPath, gateway.MCPSearchPath} {
		host := searchHost(t, srv.URL, path)
		listed := names(host.Tools())
		for _, n := range listed {
			assert.NotContains(t, n, "lazy", path)
		}
		assert.Contains(t, listed, "mcp__gw__search_tools", path)
		hits := search(t, host, map[string]any{"query": "convert celsius temperature"})
		require.NotEmpty(t, hits, path)
		assert.Equal(t, "lazy__tool_004", hits[0].Name, path)
		res, err := host.CallTool(testwait.Context(t), "mcp__gw__call_tool", map[string]any{"name": "lazy__tool_004", "arguments": map[string]any{"text": "hi"}})
		require.NoError(t, err, path)
		assert.Equal(t, "hi", res.Content[0].Text)
	}
}

// The official TypeScript SDK client, at /mcp/search, lists the search
// tools, finds a tool it never listed and calls it through call_tool.
func TestSearchModeTypeScriptClient(t *testing.T) {
	modules := tsModules(t)
	sup := upstream(t, map[string]mcpvisor.ServerConfig{
		"math":  {Config: mockserver.Command("-name", "math", "-tools", "30")},
		"files": {Config: mockserver.Command("-name", "files")},
	})
	_, srv := serve(t, sup, gateway.Options{})
	out := runNode(t, modules, "search.mjs", srv.URL+gateway.MCPSearchPath, "add two numbers", "math__add", `{"a":2,"b":40}`)
	t.Log(out)
	assert.NotContains(t, out, "FAIL")
	assert.Contains(t, out, "RESULT 42")
}

// searchHostWith is a host with opts at the gateway's endpoint (a full
// URL), speaking version.
func searchHostWith(t *testing.T, endpoint string, opts mcpvisor.Options, version string) *mcpvisor.Supervisor {
	t.Helper()
	opts.Logger = zerolog.Nop()
	h, err := mcpvisor.Start(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, h.Close(ctx))
	})
	_, err = h.SetServers(context.Background(), map[string]mcpvisor.ServerConfig{
		"gw": {Config: transports.Config{Type: "http", URL: endpoint}, ProtocolVersion: version},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	require.Equal(t, mcpvisor.StateReady, h.Status()[0].State, h.Status()[0].LastError)
	return h
}

// A call through call_tool is a direct call: a call that needs approval
// is put to the calling client by elicitation (in the handshake era, and
// within its call as input_required in the stateless era), and refused
// with CodeCallRefused for a client that cannot be asked; a tool's
// failure is the tool's isError result.
func TestSearchModeCallToolIsADirectCall(t *testing.T) {
	var fwd gateway.Forwarder
	opts := mcpvisor.Options{Logger: zerolog.Nop(), Permissions: mcpvisor.PermissionRules{Ask: []string{"mcp__*__add"}}}
	fwd.Configure(&opts)
	sup, err := mcpvisor.Start(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(ctx))
	})
	_, err = sup.SetServers(context.Background(), map[string]mcpvisor.ServerConfig{"fx": {Config: mockserver.Command("-name", "fx")}},
		mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	g, srv := serve(t, sup, gateway.Options{ToolMode: gateway.ToolsSearch})
	fwd.Attach(g)

	var mu sync.Mutex
	asked := 0
	approve := mcpvisor.Options{Elicitation: func(_ context.Context, _ string, req *protocol.ElicitParams) (*protocol.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		asked++
		return &protocol.ElicitResult{Action: protocol.ElicitAccept, Content: map[string]json.RawMessage{"approve": json.RawMessage("true")}}, nil
	}}
	add := map[string]any{"name": "fx__add", "arguments": map[string]any{"a": 1, "b": 2}}
	for _, version := range []string{protocol.Version20251125, protocol.Version20260728} {
		capable := searchHostWith(t, srv.URL+gateway.MCPPath, approve, version)
		res, err := capable.CallTool(t.Context(), "mcp__gw__call_tool", add)
		require.NoError(t, err, version)
		assert.Equal(t, "3", res.Content[0].Text, version)
		mu.Lock()
		assert.Equal(t, 1, asked, "%s: the calling client was asked", version)
		asked = 0
		mu.Unlock()
	}

	plain := searchHostWith(t, srv.URL+gateway.MCPSearchPath, mcpvisor.Options{}, protocol.Version20251125)
	_, err = plain.CallTool(t.Context(), "mcp__gw__call_tool", add)
	var pe *protocol.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, int64(gateway.CodeCallRefused), pe.Code)
	assert.Contains(t, pe.Message, "declared no elicitation")

	res, err := plain.CallTool(t.Context(), "mcp__gw__call_tool", map[string]any{"name": "fx__fail"})
	require.NoError(t, err)
	assert.True(t, res.IsError, "the tool's own failure")
	// call_tool does not call the search tools.
	_, err = plain.CallTool(t.Context(), "mcp__gw__call_tool", map[string]any{"name": "search_tools", "arguments": map[string]any{"query": "x"}})
	require.ErrorAs(t, err, &pe)
	assert.EqualValues(t, protocol.CodeInvalidParams, pe.Code)
}
