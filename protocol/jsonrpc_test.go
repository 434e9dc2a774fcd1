package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeClassifiesMessages(t *testing.T) {
	tests := []struct {
		name   string
		frame  string
		kind   Kind
		id     ID
		method string
	}{
		{"request with integer id", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, KindRequest, Int64ID(7), "tools/list"},
		{"request with string id", `{"jsonrpc":"2.0","id":"a-1","method":"ping","params":{}}`, KindRequest, StringID("a-1"), "ping"},
		{"request with negative id", `{"jsonrpc":"2.0","id":-3,"method":"ping"}`, KindRequest, Int64ID(-3), "ping"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, KindNotification, ID{}, "notifications/initialized"},
		{"notification with null id", `{"jsonrpc":"2.0","id":null,"method":"notifications/progress"}`, KindNotification, ID{}, "notifications/progress"},
		{"result", `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`, KindResponse, Int64ID(1), ""},
		{"null result", `{"jsonrpc":"2.0","id":1,"result":null}`, KindResponse, Int64ID(1), ""},
		{"error", `{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"nope"}}`, KindResponse, StringID("x"), ""},
		{"error with null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`, KindResponse, ID{}, ""},
		{"surrounding whitespace and CR", " \t{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\r", KindResponse, Int64ID(2), ""},
		{"members in any order", `{"result":{},"id":3,"jsonrpc":"2.0"}`, KindResponse, Int64ID(3), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode([]byte(tt.frame))
			require.NoError(t, err)
			assert.Equal(t, tt.kind, m.Kind)
			assert.Equal(t, tt.id, m.ID)
			assert.Equal(t, tt.method, m.Method)
		})
	}
}

func TestDecodeRejectsWithTypedErrors(t *testing.T) {
	tests := []struct {
		name  string
		frame string
		want  error
	}{
		{"empty", ``, ErrParse},
		{"not json", `hello from a chatty server`, ErrParse},
		{"truncated", `{"jsonrpc":"2.0","id":1,"res`, ErrParse},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, ErrBatch},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, ErrInvalidMessage},
		{"missing version", `{"id":1,"method":"ping"}`, ErrInvalidMessage},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, ErrInvalidMessage},
		{"exponent id", `{"jsonrpc":"2.0","id":1e3,"result":{}}`, ErrInvalidMessage},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, ErrInvalidMessage},
		{"method and result", `{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}`, ErrInvalidMessage},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`, ErrInvalidMessage},
		{"result without id", `{"jsonrpc":"2.0","result":{}}`, ErrInvalidMessage},
		{"nothing", `{"jsonrpc":"2.0","id":1}`, ErrInvalidMessage},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":5}`, ErrInvalidMessage},
		{"scalar", `42`, ErrParse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.frame))
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.want)
		})
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	frames := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"s":"hi"}}}`,
		`{"jsonrpc":"2.0","id":"abc","method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"timeout"}}`,
		`{"jsonrpc":"2.0","id":9,"result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":9,"error":{"code":-32022,"message":"unsupported","data":{"supported":["2025-11-25"]}}}`,
	}
	for _, f := range frames {
		m, err := Decode([]byte(f))
		require.NoError(t, err, f)
		out, err := Encode(m)
		require.NoError(t, err)
		assert.JSONEq(t, f, string(out))
		m2, err := Decode(out)
		require.NoError(t, err)
		assert.Equal(t, m, m2)
	}
}

func TestAppendRequestEscapesAndValidates(t *testing.T) {
	b, err := AppendRequest(nil, Int64ID(12), "weird\"method\n", map[string]int{"a": 1})
	require.NoError(t, err)
	m, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, "weird\"method\n", m.Method)
	assert.JSONEq(t, `{"a":1}`, string(m.Params))

	_, err = AppendRequest(nil, Int64ID(1), "x", json.RawMessage(`{broken`))
	assert.Error(t, err, "raw params must be valid JSON")

	b, err = AppendRequest(nil, ID{}, NotificationInitialized, nil)
	require.NoError(t, err)
	assert.Equal(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, string(b))
}

func TestIDStringAndJSON(t *testing.T) {
	assert.Equal(t, "42", Int64ID(42).String())
	assert.Equal(t, `"x\"y"`, StringID(`x"y`).String())
	assert.Equal(t, "null", ID{}.String())
	var id ID
	require.NoError(t, json.Unmarshal([]byte(`"7"`), &id))
	assert.Equal(t, StringID("7"), id, "a string id stays a string even when it looks like a number")
	assert.NotEqual(t, Int64ID(7), id)
}

func TestErrorIsAnError(t *testing.T) {
	var err error = NewError(CodeMethodNotFound, "method %q not found", "x/y")
	assert.Contains(t, err.Error(), "-32601")
	assert.Contains(t, err.Error(), `"x/y"`)
}
