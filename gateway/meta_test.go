package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/testserver"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// A downstream request's _meta goes upstream whole, but for the keys the
// gateway owns: the progress token (the upstream request carries the
// supervisor's, if any) and the stateless era's protocol keys (the
// upstream request carries those of the gateway's own connection). It
// holds for clients of both eras and servers of both eras (the servers
// answer with the _meta they got).
func TestCallerMetaIsForwarded(t *testing.T) {
	t.Parallel()
	_, url := testserver.Serve(t, testserver.Options{})
	_, gw := statelessGateway(t, map[string]mcpvisor.ServerConfig{
		"modern": {Config: transports.Config{URL: url}},
		"old":    {Config: testserver.Command(), ProtocolVersion: protocol.Version20251125},
	}, gateway.Options{Names: gateway.NamesQualified})

	const callerMeta = `"progressToken":"p1","com.example/trace":"abc","x":{"y":[1,2]}`
	check := func(t *testing.T, server, text string) {
		t.Helper()
		var got map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(text), &got), "the meta tool answers JSON: %s", text)
		assert.JSONEq(t, `"abc"`, string(got["com.example/trace"]), "%s: the caller's key, in %s", server, text)
		assert.JSONEq(t, `{"y":[1,2]}`, string(got["x"]), "%s: the caller's key, in %s", server, text)
		if tok, ok := got[protocol.MetaProgressToken]; ok {
			assert.NotEqual(t, `"p1"`, string(tok), "%s: the caller's progress token must not go upstream: %s", server, text)
		}
		if info, ok := got[protocol.MetaClientInfo]; ok {
			assert.NotContains(t, string(info), `"downstream"`, "%s: the upstream request names the gateway's client, not the caller: %s", server, text)
		}
		if server == "modern" {
			assert.JSONEq(t, `"2026-07-28"`, string(got[protocol.MetaProtocolVersion]), "%s: the gateway's own protocol keys: %s", server, text)
			assert.Contains(t, got, protocol.MetaClientCapabilities, "%s: %s", server, text)
		} else {
			assert.NotContains(t, got, protocol.MetaProtocolVersion, "%s: a handshake-era server gets no protocol keys: %s", server, text)
		}
	}
	textOf := func(t *testing.T, result json.RawMessage) string {
		t.Helper()
		var r protocol.CallToolResult
		require.NoError(t, json.Unmarshal(result, &r), "%s", result)
		require.Len(t, r.Content, 1, "%s", result)
		return r.Content[0].Text
	}

	t.Run("stateless client", func(t *testing.T) {
		c := newStatelessClient(t, gw, `{}`)
		for _, server := range []string{"modern", "old"} {
			params := `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"downstream","version":"1"},` +
				`"io.modelcontextprotocol/clientCapabilities":{},` + callerMeta + `},"name":"mcp__` + server + `__meta","arguments":{}}`
			a := c.raw(protocol.MethodToolsCall, params, nil)
			require.Nil(t, a.msg.Error, a.raw)
			check(t, server, textOf(t, a.msg.Result))
		}
	})
	t.Run("handshake client", func(t *testing.T) {
		c := &rawClient{t: t, url: gw}
		c.initialize()
		for _, server := range []string{"modern", "old"} {
			resp, body := c.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{` + callerMeta + `},"name":"mcp__` + server + `__meta","arguments":{}}}`)
			require.Equal(t, 200, resp.StatusCode, body)
			if data, ok := strings.CutPrefix(strings.TrimSpace(body), "event: message\ndata: "); ok {
				body = data
			}
			m, err := protocol.Decode([]byte(strings.TrimSpace(body)))
			require.NoError(t, err, body)
			require.Nil(t, m.Error, body)
			check(t, server, textOf(t, m.Result))
		}
	})
}
