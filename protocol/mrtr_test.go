package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResultTypeOf(t *testing.T) {
	for in, want := range map[string]string{
		`{"content":[]}`: "",
		`{"resultType":"input_required","requestState":"x"}`: ResultInputRequired,
		`{"resultType":"complete"}`:                          ResultComplete,
		`{"resultType":"t\u0061sk"}`:                         ResultTask, // escapes: encoding/json decides
	} {
		assert.Equal(t, want, ResultTypeOf(json.RawMessage(in)), in)
	}
}

func TestParseInputResponsesRefusesWhatIsNotAnObjectOfResults(t *testing.T) {
	got, perr := ParseInputResponses(json.RawMessage(`{"user_name":{"action":"accept","content":{"name":"A"}}}`))
	require.Nil(t, perr)
	assert.JSONEq(t, `{"action":"accept","content":{"name":"A"}}`, string(got["user_name"]))
	got, perr = ParseInputResponses(nil)
	assert.Nil(t, perr)
	assert.Nil(t, got)
	for _, bad := range []string{`null`, `[]`, `12`, `{"user_name":12345}`, `{"user_name":null}`, `{"a":"text"}`} {
		_, perr := ParseInputResponses(json.RawMessage(bad))
		require.NotNil(t, perr, bad)
		assert.Equal(t, int64(CodeInvalidParams), perr.Code, bad)
	}
}

func TestWithMRTRReplacesTheRetryMembers(t *testing.T) {
	out, err := withMRTR(json.RawMessage(`{"name":"t","arguments":{},"requestState":"old","inputResponses":{"k":{}}}`),
		MRTRParams{InputResponses: InputResponses{"user_name": json.RawMessage(`{"action":"accept"}`)}, RequestState: "s1"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"t","arguments":{},"requestState":"s1","inputResponses":{"user_name":{"action":"accept"}}}`, string(out))
	out, err = withMRTR(nil, MRTRParams{InputResponses: InputResponses{}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"inputResponses":{}}`, string(out))
	_, err = withMRTR(json.RawMessage(`[1]`), MRTRParams{})
	assert.Error(t, err)
}

func TestCacheHintStricterTakesTheShorterAndTheNarrower(t *testing.T) {
	ten, minus := int64(10_000), int64(-5)
	a := HintOf(&ten, CacheScopePublic)
	assert.Equal(t, CacheHint{TTLMs: 10_000, Public: true}, a)
	assert.Equal(t, CacheHint{}, HintOf(nil, ""), "no hints: immediately stale, private")
	assert.Equal(t, CacheHint{}, HintOf(&minus, "bogus"))
	five := int64(5_000)
	b := HintOf(&five, CacheScopePrivate)
	assert.Equal(t, CacheHint{TTLMs: 5_000}, a.Stricter(b))
	assert.Equal(t, CacheScopePrivate, a.Stricter(b).Scope())
	assert.Equal(t, CacheScopePublic, a.Stricter(a).Scope())
}

func TestCallToolResultOfAnInterimTypeHasNoEmptyContent(t *testing.T) {
	b, err := json.Marshal(CallToolResult{ResultType: ResultTask, Extra: Extra{"taskId": json.RawMessage(`"t1"`)}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"resultType":"task","taskId":"t1"}`, string(b))
	b, err = json.Marshal(CallToolResult{})
	require.NoError(t, err)
	assert.JSONEq(t, `{"content":[]}`, string(b))
}
