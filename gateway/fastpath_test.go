package gateway

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// The hand-written encoding of text results says what encoding/json says,
// and declines everything else.
func TestAppendTextResultAgreesWithEncodingJSON(t *testing.T) {
	for _, r := range []protocol.CallToolResult{
		{},
		{Content: []protocol.Content{protocol.TextContent("")}},
		{Content: []protocol.Content{protocol.TextContent("a \"quoted\" <b>&</b>\n\u2028 é"), protocol.TextContent("two")}, IsError: true},
	} {
		got, ok := appendTextResult(nil, &r)
		require.True(t, ok)
		want, err := json.Marshal(r)
		require.NoError(t, err)
		assert.JSONEq(t, string(want), string(got))
	}
	for _, r := range []protocol.CallToolResult{
		{Content: []protocol.Content{{Type: protocol.ContentImage, Data: "AA==", MimeType: "image/png"}}},
		{Content: []protocol.Content{protocol.TextContent("x")}, StructuredContent: json.RawMessage(`{}`)},
		{Content: []protocol.Content{protocol.TextContent("x")}, Meta: protocol.Meta{"k": json.RawMessage(`1`)}},
	} {
		_, ok := appendTextResult(nil, &r)
		assert.False(t, ok)
	}
}

// The params scan agrees with encoding/json, or declines; of _meta it
// keeps what the gateway reads or forwards (the stateless era's protocol
// keys are mcpserver's).
func TestScanCallParams(t *testing.T) {
	for _, raw := range []string{
		`{"name":"t","arguments":{"a":1}}`,
		`{"name":"t"}`,
		`{"name":"t","arguments":null,"_meta":{"progressToken":7}}`,
		`{"Name":"t"}`,
		`{"name":"t\u0041"}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
			`"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}},"name":"t","arguments":{}}`,
		`{"_meta":{"io.modelcontextprotocol/logLevel":"info","x/trace":"a","x/trace":"b","progressToken":"p"},"name":"t"}`,
		`{"_meta":{"x\u0041":1},"name":"t"}`,
		`{"_meta":[],"name":"t"}`,
	} {
		p, ok := scanCallParams(json.RawMessage(raw))
		if !ok {
			continue
		}
		var want protocol.CallToolParams
		require.NoError(t, json.Unmarshal([]byte(raw), &want))
		assert.Equal(t, want.Name, p.Name, raw)
		if string(want.Arguments) == "null" {
			want.Arguments = nil // null arguments are left out
		}
		assert.Equal(t, string(want.Arguments), string(p.Arguments), raw)
		assert.Equal(t, forwardedMeta(want.Meta), forwardedMeta(p.Meta), raw)
		assert.Equal(t, string(want.Meta[protocol.MetaProgressToken]), string(p.Meta[protocol.MetaProgressToken]), raw)
		for k := range p.Meta {
			assert.False(t, isEraMeta([]byte(k)), "%s: the era's key %s is mcpserver's", raw, k)
		}
	}
	// A stateless-era call with nothing but the era's keys in _meta has
	// no Meta: nothing to read or forward, nothing allocated.
	p, ok := scanCallParams(json.RawMessage(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{}},"name":"t","arguments":{}}`))
	require.True(t, ok)
	assert.Nil(t, p.Meta)
}
