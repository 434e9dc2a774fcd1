package mcpvisor_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/httppeer"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Tool schemas reach the host byte for byte as the server sent them: the
// JSON Schema 2020-12 vocabulary ($schema, $defs, $anchor, composition,
// conditionals, additionalProperties) is kept, and a $ref to a network
// URI is never fetched (conformance json-schema-2020-12-preservation,
// json-schema-ref-no-deref).
func TestToolSchemasPassThroughUnmodified(t *testing.T) {
	var fetched atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Write([]byte(`{"type":"string"}`))
	}))
	defer elsewhere.Close()
	schema := `{ "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type":"object", "additionalProperties": false,
  "$defs": {"addr": {"$anchor": "address", "type":"object", "properties": {"zip": {"type":"string"}}}},
  "properties": {
    "home": {"$ref": "#/$defs/addr"},
    "remote": {"$ref": "` + elsewhere.URL + `/schema.json"},
    "kind": {"anyOf": [{"const":"a"}, {"const":"b"}]},
    "n": {"allOf": [{"type":"integer"}, {"minimum": 1}]}
  },
  "if": {"properties": {"kind": {"const":"a"}}}, "then": {"required": ["home"]}, "else": {"required": ["n"]}
}`
	peer := httppeer.New(t, mockserver.Options{})
	peer.SetHook(func(w http.ResponseWriter, p httppeer.Post) bool {
		if p.Msg.Method != protocol.MethodToolsList {
			return false
		}
		httppeer.Result(w, p, `{"resultType":"complete","ttlMs":0,"cacheScope":"private","tools":[{"name":"rich","inputSchema":`+schema+`}]}`)
		return true
	})
	sup := startWith(t, peer.URL())
	tools := sup.Tools()
	require.Len(t, tools, 1)
	assert.Equal(t, schema, string(tools[0].Definition.InputSchema), "the schema as the server sent it, byte for byte")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Calling the tool validates nothing against the schema either (the
	// mock answers that it has no such tool; the answer does not matter).
	_, _ = sup.CallTool(ctx, mcpvisor.QualifiedName("s", "rich"), map[string]any{"kind": "b", "n": 2})
	assert.Zero(t, fetched.Load(), "a $ref to a network URI is never fetched")
}
