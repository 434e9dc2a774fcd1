package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestListToolsPageDecodesAsToolByTool: the one-pass decode of a
// tools/list page gives what decoding each Tool on its own gives, Extra
// included (members Tool does not name, escaped keys, nested objects
// with any keys, keys named like the page's own members).
func TestListToolsPageDecodesAsToolByTool(t *testing.T) {
	for name, page := range map[string]string{
		"plain":        `{"tools":[{"name":"a","description":"x","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}},{"name":"b","inputSchema":{}}],"nextCursor":"c2"}`,
		"annotations":  `{"tools":[{"name":"a","inputSchema":{},"annotations":{"readOnlyHint":true,"odd":1},"_meta":{"k":[1,{"x":2}]}}],"ttlMs":5,"cacheScope":"session","resultType":"complete"}`,
		"extra member": `{"tools":[{"name":"a","inputSchema":{}},{"name":"b","inputSchema":{},"x-vendor":{"y":1}}]}`,
		"escaped key":  `{"tools":[{"name":"a","inputSchema":{},"n\u0061me2":1}]}`,
		"wrong case":   `{"tools":[{"Name":"a","inputSchema":{}}]}`,
		"tools after":  `{"nextCursor":"z","other":{"tools":[{"zzz":1}]},"tools":[{"name":"a","inputSchema":{"tools":[{"q":1}]}}]}`,
		"strings":      `{"tools":[{"name":"a, \"b\": {","description":"}],[{","inputSchema":{}}]}`,
		"empty":        `{"tools":[]}`,
		"no tools":     `{}`,
		"null tools":   `{"tools":null}`,
		"unknown top":  `{"tools":[{"name":"a","inputSchema":{}}],"zz":{"a":[{"b":1}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			var got ListToolsResult
			require.NoError(t, Unmarshal([]byte(page), &got))
			type plain ListToolsResult
			var want plain
			require.NoError(t, json.Unmarshal([]byte(page), &want))
			assert.Equal(t, ListToolsResult(want), got)
		})
	}
}

func TestElementsHaveUnknownKey(t *testing.T) {
	known := map[string]bool{"name": true, "inputSchema": true}
	for data, want := range map[string]bool{
		`{"tools":[{"name":"a"},{"inputSchema":{"other":1}}]}`: false,
		`{"tools":[{"name":"a"},{"other":1}]}`:                 true,
		`{"other":[{"zzz":1}],"tools":[{"name":"a"}]}`:         false,
		`{"tools":[{"name":"a","n\u0061me":1}]}`:               true,
		`{"tools":[["name",{"zzz":1}]]}`:                       false,
		`{"tools":[{"name":"\"zzz\":"}]}`:                      false,
	} {
		assert.Equal(t, want, elementsHaveUnknownKey([]byte(data), "tools", known), data)
	}
}

func BenchmarkListToolsDecode(b *testing.B) {
	page := []byte(`{"tools":[` +
		`{"name":"echo","description":"Echoes its input.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},"annotations":{"readOnlyHint":true}},` +
		`{"name":"add","description":"Adds a and b.","inputSchema":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]},"outputSchema":{"type":"object","properties":{"sum":{"type":"number"}}}},` +
		`{"name":"fail","description":"Fails.","inputSchema":{"type":"object"}},` +
		`{"name":"sleep","description":"Sleeps ms.","inputSchema":{"type":"object","properties":{"ms":{"type":"integer"}}}},` +
		`{"name":"announce","description":"Adds a tool.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}` +
		`],"ttlMs":60000,"cacheScope":"session"}`)
	b.Run("page", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r ListToolsResult
			if err := Unmarshal(page, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tool-by-tool", func(b *testing.B) {
		b.ReportAllocs()
		type plain ListToolsResult
		for b.Loop() {
			var r plain
			if err := json.Unmarshal(page, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
