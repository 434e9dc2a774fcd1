package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestToolKeepsUnknownMembersAndMeta(t *testing.T) {
	in := `{
		"name":"search",
		"title":"Search",
		"description":"find things",
		"inputSchema":{"type":"object","properties":{"q":{"type":"string"}}},
		"outputSchema":{"type":"object"},
		"annotations":{"readOnlyHint":true,"openWorldHint":false},
		"icons":[{"src":"https://x/i.png","sizes":["48x48"]}],
		"_meta":{"vendor.example/rank":3,"nested":{"a":[1,2]}},
		"execution":{"taskSupport":"optional"},
		"x-future":"kept"
	}`
	var tool Tool
	require.NoError(t, json.Unmarshal([]byte(in), &tool))
	assert.Equal(t, "search", tool.Name)
	require.NotNil(t, tool.Annotations)
	assert.True(t, *tool.Annotations.ReadOnlyHint)
	assert.False(t, *tool.Annotations.OpenWorldHint)
	assert.Nil(t, tool.Annotations.DestructiveHint, "absent hints stay absent")
	var rank int
	assert.True(t, tool.Meta.Get("vendor.example/rank", &rank))
	assert.Equal(t, 3, rank)
	assert.Len(t, tool.Extra, 2)

	out, err := json.Marshal(tool)
	require.NoError(t, err)
	assert.JSONEq(t, in, string(out), "decode→encode loses nothing")
}

func TestToolWithoutSchemaEncodesAnObjectSchema(t *testing.T) {
	out, err := json.Marshal(Tool{Name: "t"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"t","inputSchema":{"type":"object"}}`, string(out))
}

func TestCallToolResultContentKinds(t *testing.T) {
	in := `{
		"content":[
			{"type":"text","text":"hello","annotations":{"audience":["user"],"priority":0.5}},
			{"type":"image","data":"aGk=","mimeType":"image/png"},
			{"type":"audio","data":"aGk=","mimeType":"audio/wav"},
			{"type":"resource_link","uri":"file:///a.txt","name":"a.txt","mimeType":"text/plain","size":12},
			{"type":"resource","resource":{"uri":"demo://r/1","mimeType":"text/plain","text":"body"}},
			{"type":"text","text":""}
		],
		"structuredContent":{"sum":3},
		"isError":true,
		"_meta":{"trace":"t1"},
		"resultType":"complete",
		"task":{"id":"k"}
	}`
	var r CallToolResult
	require.NoError(t, json.Unmarshal([]byte(in), &r))
	require.Len(t, r.Content, 6)
	assert.Equal(t, "hello", r.Content[0].Text)
	assert.Equal(t, ContentImage, r.Content[1].Type)
	assert.Equal(t, "audio/wav", r.Content[2].MimeType)
	assert.Equal(t, int64(12), *r.Content[3].Size)
	assert.Equal(t, "body", r.Content[4].Resource.Text)
	assert.True(t, r.IsError)
	assert.JSONEq(t, `{"sum":3}`, string(r.StructuredContent))
	assert.Contains(t, r.Extra, "task")

	out, err := json.Marshal(r)
	require.NoError(t, err)
	assert.JSONEq(t, in, string(out))
}

func TestEmptyCallToolResultEncodesContentArray(t *testing.T) {
	out, err := json.Marshal(CallToolResult{})
	require.NoError(t, err)
	assert.JSONEq(t, `{"content":[]}`, string(out))
}

func TestResourcesAndPromptsRoundTrip(t *testing.T) {
	cases := []struct {
		in string
		v  any
	}{
		{`{"resources":[{"uri":"demo://a","name":"a","mimeType":"text/plain","size":3}],"nextCursor":"p2"}`, &ListResourcesResult{}},
		{`{"resourceTemplates":[{"uriTemplate":"demo://d/{id}","name":"d"}]}`, &ListResourceTemplatesResult{}},
		{`{"contents":[{"uri":"demo://a","blob":"AAEC","mimeType":"application/octet-stream"}]}`, &ReadResourceResult{}},
		{`{"prompts":[{"name":"p","arguments":[{"name":"x","required":true}]}]}`, &ListPromptsResult{}},
		{`{"description":"d","messages":[{"role":"user","content":{"type":"text","text":"hi"}}]}`, &GetPromptResult{}},
		{`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true},"experimental":{"claude/channel":{}}},"serverInfo":{"name":"s","version":"1"},"instructions":"be nice"}`, &InitializeResult{}},
		{`{"supportedVersions":["2026-07-28","2025-11-25"],"capabilities":{"prompts":{}},"ttlMs":0,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"2"}}}`, &DiscoverResult{}},
		{`{"progressToken":"tok","progress":2,"total":10,"message":"half"}`, &ProgressParams{}},
		{`{"level":"warning","logger":"db","data":{"msg":"slow"}}`, &LoggingMessageParams{}},
		{`{"requestId":"r1","reason":"user"}`, &CancelledParams{}},
	}
	for _, c := range cases {
		require.NoError(t, json.Unmarshal([]byte(c.in), c.v), c.in)
		out, err := json.Marshal(c.v)
		require.NoError(t, err)
		assert.JSONEq(t, c.in, string(out))
	}
}

func TestNegotiate(t *testing.T) {
	assert.Equal(t, Version20260728, Negotiate([]string{"2026-07-28", "2025-11-25"}))
	assert.Equal(t, Version20250618, Negotiate([]string{"2025-06-18", "2099-01-01"}))
	assert.Equal(t, "", Negotiate([]string{"2023-01-01"}))
	assert.True(t, UsesDiscover(Version20260728))
	assert.False(t, UsesDiscover(Version20251125))
	assert.True(t, IsSupported(Version20241105))
	assert.False(t, IsSupported("2025-01-01"))
	v := SupportedVersions()
	v[0] = "changed"
	assert.Equal(t, LatestVersion, SupportedVersions()[0], "SupportedVersions returns a copy")
}

func TestRequestMetaApplyKeepsCallerValues(t *testing.T) {
	rm := RequestMeta{ProtocolVersion: Version20260728, ClientInfo: Implementation{Name: "mcpvisor", Version: "1"}}
	m := rm.Apply(Meta{MetaProtocolVersion: json.RawMessage(`"custom"`)})
	var v string
	require.True(t, m.Get(MetaProtocolVersion, &v))
	assert.Equal(t, "custom", v)
	var info Implementation
	require.True(t, m.Get(MetaClientInfo, &info))
	assert.Equal(t, "mcpvisor", info.Name)
	assert.Contains(t, m, MetaClientCapabilities)
}
