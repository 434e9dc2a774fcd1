package protocol_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// The trace context keys of a request's _meta are the carrier's: a
// caller's own traceparent, tracestate and baggage are replaced, never
// duplicated; every other member stays as it was.
func TestSetTraceMeta(t *testing.T) {
	carrier := map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "a=1"}
	const wantMeta = `"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"a=1"`
	for _, tc := range []struct{ name, params, want string }{
		{"no params", ``, `{"_meta":{` + wantMeta + `}}`},
		{"null params", `null`, `{"_meta":{` + wantMeta + `}}`},
		{"no _meta", `{"name":"echo","arguments":{"text":"hi"}}`, `{"_meta":{` + wantMeta + `},"name":"echo","arguments":{"text":"hi"}}`},
		{"null _meta", `{"_meta":null,"name":"echo"}`, `{"_meta":{` + wantMeta + `},"name":"echo"}`},
		{"other members kept", `{"_meta":{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"echo"}`,
			`{"_meta":{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + wantMeta + `},"name":"echo"}`},
		{"caller's trace keys replaced", `{"name":"echo","_meta":{"traceparent":"00-11111111111111111111111111111111-2222222222222222-01","baggage":"k=v","x":1}}`,
			`{"_meta":{"x":1,` + wantMeta + `},"name":"echo"}`},
		{"escaped keys (decoded)", `{"n\u0061me":"echo","_meta":{"traceparent":"old"}}`, `{"_meta":{` + wantMeta + `},"name":"echo"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := protocol.SetTraceMeta([]byte(tc.params), carrier)
			require.NoError(t, err)
			require.True(t, json.Valid(got), "%s", got)
			assert.JSONEq(t, tc.want, string(got))
			assert.Equal(t, 1, countOf(string(got), `"traceparent"`), "one traceparent: %s", got)
		})
	}
	t.Run("an empty carrier drops the caller's keys", func(t *testing.T) {
		got, err := protocol.SetTraceMeta([]byte(`{"_meta":{"traceparent":"x","tracestate":"y","baggage":"z","k":true}}`), nil)
		require.NoError(t, err)
		assert.JSONEq(t, `{"_meta":{"k":true}}`, string(got))
	})
	for _, bad := range []string{`[1,2]`, `"s"`, `{"_meta":"s"}`, `{"_meta":[1]}`} {
		t.Run("not an object: "+bad, func(t *testing.T) {
			_, err := protocol.SetTraceMeta([]byte(bad), carrier)
			assert.ErrorIs(t, err, protocol.ErrParamsNotObject)
		})
	}
}

func countOf(s, sub string) int {
	n := 0
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			n++
		}
	}
	return n
}
