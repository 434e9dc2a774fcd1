package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// wait_for_channel_message waits 300 s unless told, never more than
// 600 s; the older timeoutMs still works; max_messages defaults to one.
func TestWaitArgs(t *testing.T) {
	for _, tc := range []struct {
		args    string
		timeout time.Duration
		max     int
	}{
		{``, 300 * time.Second, 1},
		{`null`, 300 * time.Second, 1},
		{`{}`, 300 * time.Second, 1},
		{`{"timeout_seconds":2.5}`, 2500 * time.Millisecond, 1},
		{`{"timeout_seconds":0}`, 0, 1},
		{`{"timeout_seconds":3600}`, 600 * time.Second, 1},
		{`{"timeoutMs":1500}`, 1500 * time.Millisecond, 1},
		{`{"timeoutMs":9999999}`, 600 * time.Second, 1},
		{`{"timeoutMs":1500,"timeout_seconds":4}`, 4 * time.Second, 1},
		{`{"max_messages":50}`, 300 * time.Second, 50},
		{`{"max_messages":1000000}`, 300 * time.Second, 1000},
	} {
		w, perr := parseWaitArgs(json.RawMessage(tc.args))
		require.Nil(t, perr, tc.args)
		assert.Equal(t, tc.timeout, w.timeout, tc.args)
		assert.Equal(t, tc.max, w.max, tc.args)
	}
	for _, bad := range []string{`[1]`, `{"timeout_seconds":"soon"}`, `{"timeout_seconds":-1}`, `{"max_messages":0}`, `{"max_messages":-3}`} {
		_, perr := parseWaitArgs(json.RawMessage(bad))
		require.NotNil(t, perr, bad)
		assert.Equal(t, int64(protocol.CodeInvalidParams), perr.Code, bad)
	}
	var schema map[string]any
	require.NoError(t, json.Unmarshal(waitTool.InputSchema, &schema), "the input schema is JSON")
}
