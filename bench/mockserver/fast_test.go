package mockserver

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// fastPathParams are params of every shape the fast paths meet or must
// refuse.
var fastPathParams = []string{
	`{"name":"echo","arguments":{"text":"0123456789abcdef"}}`,
	`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcpvisor","version":"0.1.0"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"echo","arguments":{"text":"0123456789abcdef"}}`,
	` { "name" : "echo" , "arguments" : { "text" : "a b" } } `,
	`{"NAME":"echo","Arguments":{"TEXT":"x"}}`,
	`{"name":"echo","name":"add","arguments":{"text":"x"}}`,
	`{"name":"echo","arguments":{"text":"x","text":"y"}}`,
	`{"name":"echo","arguments":{"text":"x","text":null}}`,
	`{"name":"echo","arguments":{"text":null}}`,
	`{"name":"echo","arguments":{"text":1}}`,
	`{"name":"echo","arguments":{"text":"\u00e9\n"}}`,
	`{"name":"echo","arguments":{"text":"é"}}`,
	`{"name":"echo","arguments":{"text":"<&>"}}`,
	`{"name":"echo","arguments":{"text":""}}`,
	`{"name":"echo","arguments":{"other":[1,{"a":"}"}],"text":"t"}}`,
	`{"name":"echo","arguments":null}`,
	`{"name":"echo","arguments":[]}`,
	`{"name":"echo","arguments":"x"}`,
	`{"name":"echo"}`,
	`{"name":null,"arguments":{}}`,
	`{"name":7}`,
	`{"name":"ec\"ho"}`,
	`{"n\u0061me":"echo"}`,
	`{"arguments":{"text":"x"}}`,
	`{"name":"add","arguments":{"a":1,"b":2}}`,
	`{"name":"add","arguments":{"A":1,"b":"2"}}`,
	`{"name":"sleep","arguments":{"ms":5}}`,
	`{"name":"notify","arguments":{"method":"m","params":{"k":1}}}`,
	`{"name":"echo","arguments":{"mſ":1,"text":"k"}}`,
	`{}`,
	`[]`,
	`"params"`,
	`null`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolVersion":"2025-06-18"}}`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":null}}`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728}}`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026\u002d07-28"}}`,
	`{"_meta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}}`,
	`{"_META":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"_meta":{"x":1}}`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"_meta":null}`,
	`{"_meta":null}`,
	`{"_meta":[]}`,
	`{"_meta":"2026-07-28"}`,
	`{"_meta":{}}`,
	`{"_meta":{"a":{"b":["}",{"c":"\""}]}},"x":[{}],"y":"\\"}`,
}

// TestFastPathsAgreeWithEncodingJSON: whatever the fast path accepts,
// it decodes as encoding/json does. (The _meta of a request is read by
// mcpserver, whose tests check the same of its scan.)
func TestFastPathsAgreeWithEncodingJSON(t *testing.T) {
	fastCall := 0
	for _, params := range fastPathParams {
		require.True(t, json.Valid([]byte(params)), params)
		checkFastPaths(t, []byte(params), &fastCall)
	}
	// The benchmarked shapes take the fast path.
	assert.GreaterOrEqual(t, fastCall, 10)
}

func checkFastPaths(t *testing.T, params []byte, fastCall *int) {
	t.Helper()
	var want callParams
	wantErr := json.Unmarshal(params, &want)
	var got callParams
	if fastCallParams(params, &got) {
		*fastCall++
		require.NoError(t, wantErr, "fast path accepted %s", params)
		require.Equal(t, want, got, "%s", params)
	}
	var viaDecode callParams
	err := decodeCallParams(params, &viaDecode)
	require.Equal(t, wantErr == nil, err == nil, "%s", params)
	if err == nil {
		require.Equal(t, want, viaDecode, "%s", params)
	}
}

func FuzzFastPaths(f *testing.F) {
	for _, p := range fastPathParams {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, params string) {
		if !json.Valid([]byte(params)) {
			return // params reach the server validated
		}
		var n int
		checkFastPaths(t, []byte(params), &n)
	})
}

// TestAppendTextResult: the hand-encoded echo answer is byte for byte
// what protocol.AppendResult makes of the CallToolResult, or refused.
func TestAppendTextResult(t *testing.T) {
	ids := []protocol.ID{protocol.Int64ID(0), protocol.Int64ID(7), protocol.Int64ID(-1 << 63), protocol.StringID("a"), protocol.StringID(`q"<é`)}
	texts := []string{"0123456789abcdef", "x", " ~!#$%'()*+,-./:;=?@[]^_`{|}", "", "<", ">", "&", `"`, `\`, "\n", "\x7f", "é", "\u2028", "\xff"}
	accepted := 0
	for _, id := range ids {
		for _, text := range texts {
			want, err := protocol.AppendResult(nil, id, protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(text)}})
			require.NoError(t, err)
			got, ok := appendTextResult([]byte("prefix"), id, text)
			if !ok {
				assert.Equal(t, "prefix", string(got))
				continue
			}
			accepted++
			assert.Equal(t, "prefix"+string(want), string(got), "id %v text %q", id, text)
		}
	}
	assert.Equal(t, len(ids)*3, accepted)
}
