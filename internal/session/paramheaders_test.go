package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/httppeer"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/streamable"
)

// headerTools are tool definitions with x-mcp-header annotations, valid
// and not, as the conformance suite's http-custom-headers and
// http-invalid-tool-headers scenarios serve them.
const headerTools = `[
 {"name":"valid_tool","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}},
 {"name":"invalid_empty_header","inputSchema":{"type":"object","properties":{"v":{"type":"string","x-mcp-header":""}}}},
 {"name":"invalid_object_header","inputSchema":{"type":"object","properties":{"v":{"type":"object","x-mcp-header":"Data"}}}},
 {"name":"invalid_duplicate_diff_case","inputSchema":{"type":"object","properties":{
   "a":{"type":"string","x-mcp-header":"MyField"},"b":{"type":"string","x-mcp-header":"myfield"}}}},
 {"name":"invalid_colon_in_name","inputSchema":{"type":"object","properties":{"v":{"type":"string","x-mcp-header":"My:Header"}}}},
 {"name":"test_custom_headers","inputSchema":{"type":"object","properties":{
   "region":{"type":"string","x-mcp-header":"Region"},
   "priority":{"type":"integer","x-mcp-header":"Priority"},
   "verbose":{"type":"boolean","x-mcp-header":"Verbose"},
   "non_ascii":{"type":"string","x-mcp-header":"NonAscii"},
   "float_val":{"type":"number"},
   "query":{"type":"string"}}}},
 {"name":"plain_tool","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}}
]`

// serveHeaderTools answers tools/list with headerTools and tools/call
// with a plain result; the mock answers the rest.
func serveHeaderTools(w http.ResponseWriter, p httppeer.Post) bool {
	id, _ := json.Marshal(p.Msg.ID)
	switch p.Msg.Method {
	case protocol.MethodToolsList:
		httppeer.WriteJSON(w, http.StatusOK, fmt.Appendf(nil,
			`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","ttlMs":0,"cacheScope":"private","tools":%s}}`, id, headerTools))
		return true
	case protocol.MethodToolsCall:
		httppeer.WriteJSON(w, http.StatusOK, fmt.Appendf(nil,
			`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","content":[{"type":"text","text":"ok"}]}}`, id))
		return true
	}
	return false
}

// lastCall returns the headers of the last tools/call the peer received.
func lastCall(t *testing.T, peer *httppeer.Peer) http.Header {
	t.Helper()
	posts := peer.Received()
	for i := len(posts) - 1; i >= 0; i-- {
		if posts[i].Msg.Method == protocol.MethodToolsCall {
			return posts[i].Header
		}
	}
	t.Fatal("the peer received no tools/call")
	return nil
}

func paramHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		if len(k) > len(protocol.ParamHeaderPrefix) && http.CanonicalHeaderKey(k[:len(protocol.ParamHeaderPrefix)]) == protocol.ParamHeaderPrefix {
			out[http.CanonicalHeaderKey(k)] = v[0]
		}
	}
	return out
}

// Over Streamable HTTP in the stateless era, a tool with an invalid
// x-mcp-header annotation is left out of the list without hiding the
// valid ones, and a call mirrors the designated arguments into
// Mcp-Param-* headers (base64 where needed, none for null or absent).
func TestToolParametersAreMirroredIntoHeaders(t *testing.T) {
	peer := httppeer.New(t, mockserver.Options{})
	peer.SetHook(serveHeaderTools)
	s, err := openHTTP(t, peer, session.Options{})
	require.NoError(t, err)
	require.Equal(t, protocol.Version20260728, s.Peer().Version)
	ctx := context.Background()

	tools, err := s.Lists().Tools(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"valid_tool", "test_custom_headers", "plain_tool"}, toolNames(tools))

	_, err = s.CallTool(ctx, "test_custom_headers", json.RawMessage(
		`{"region":"us-west1","priority":42,"verbose":null,"non_ascii":"Hello, 世界","float_val":3.14,"query":"SELECT 1"}`), nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"Mcp-Param-Region":   "us-west1",
		"Mcp-Param-Priority": "42",
		"Mcp-Param-Nonascii": "=?base64?SGVsbG8sIOS4lueVjA==?=",
	}, paramHeaders(lastCall(t, peer)), "designated, non-null arguments only")

	// The typed-meta path (a call with _meta) mirrors too.
	_, err = s.CallTool(ctx, "valid_tool", json.RawMessage(`{"region":"eu"}`), protocol.Meta{"progressToken": json.RawMessage(`1`)})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"Mcp-Param-Region": "eu"}, paramHeaders(lastCall(t, peer)))

	_, err = s.CallTool(ctx, "plain_tool", json.RawMessage(`{"q":"x"}`), nil)
	require.NoError(t, err)
	assert.Empty(t, paramHeaders(lastCall(t, peer)))

	_, err = s.CallTool(ctx, "valid_tool", json.RawMessage(`{"region":{"nested":true}}`), nil)
	assert.ErrorIs(t, err, protocol.ErrParamHeaderValue, "a value that cannot be mirrored is refused before sending")
}

// In the handshake eras the annotations mean nothing: every tool is
// listed and no Mcp-Param header is sent.
func TestParamHeadersAreIgnoredInTheHandshakeEras(t *testing.T) {
	peer := httppeer.New(t, mockserver.Options{})
	peer.SetHook(serveHeaderTools)
	s, err := openHTTP(t, peer, session.Options{ProtocolVersion: protocol.Version20251125})
	require.NoError(t, err)
	ctx := context.Background()
	tools, err := s.Lists().Tools(ctx)
	require.NoError(t, err)
	assert.Len(t, tools, 7)
	_, err = s.CallTool(ctx, "test_custom_headers", json.RawMessage(`{"region":"us-west1"}`), nil)
	require.NoError(t, err)
	assert.Empty(t, paramHeaders(lastCall(t, peer)))
}

// BenchmarkCallToolParamHeaders measures a call over Streamable HTTP
// (2026-07-28) to a tool without annotations and to one with four
// mirrored arguments (one of them base64-encoded).
func BenchmarkCallToolParamHeaders(b *testing.B) {
	peer := httppeer.New(b, mockserver.Options{})
	peer.SetHook(serveHeaderTools)
	s, err := session.Open(context.Background(), func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
		return streamable.Dial(ctx, transports.Config{Type: transports.TypeHTTP, URL: peer.URL()}, streamable.Options{}, r)
	}, session.Options{ClientInfo: protocol.Implementation{Name: "bench", Version: "0"}})
	require.NoError(b, err)
	defer s.Close(context.Background(), nil)
	ctx := context.Background()
	_, err = s.Lists().Tools(ctx)
	require.NoError(b, err)
	for _, tc := range []struct{ tool, args string }{
		{"plain_tool", `{"q":"x"}`},
		{"test_custom_headers", `{"region":"us-west1","priority":42,"verbose":true,"non_ascii":"Hello, 世界","query":"q"}`},
	} {
		b.Run(tc.tool, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.CallTool(ctx, tc.tool, json.RawMessage(tc.args), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
