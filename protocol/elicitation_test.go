package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestElicitationDefaultsKeepExactJSONTypes(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{
		"name":{"type":"string","default":"John Doe"},
		"age":{"type":"integer","default":30},
		"score":{"type":"number","default":95.5},
		"status":{"type":"string","enum":["active","inactive"],"default":"active"},
		"verified":{"type":"boolean","default":true},
		"nickname":{"type":"string"}}}`)
	content, err := ElicitationDefaults(schema)
	require.NoError(t, err)
	out, err := json.Marshal(ElicitResult{Action: ElicitAccept, Content: content})
	require.NoError(t, err)
	assert.JSONEq(t, `{"action":"accept","content":{"name":"John Doe","age":30,"score":95.5,"status":"active","verified":true}}`, string(out))

	empty, err := ElicitationDefaults(nil)
	require.NoError(t, err)
	assert.Empty(t, empty)
	_, err = ElicitationDefaults(json.RawMessage(`[1]`))
	assert.Error(t, err)
}
