package protocol

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFindIDInAFramePrefix(t *testing.T) {
	for prefix, want := range map[string]ID{
		`{"jsonrpc":"2.0","id":42,"result":{"content":[{"text":"xxxx`:        Int64ID(42),
		`{"result":{"id":7,"nested":true},"id":"a\"b","jsonrpc":"2.0"`:       StringID(`a"b`),
		`{"jsonrpc":"2.0","result":{"text":"\"id\":9 inside a string"},"id"`: {},
		`{"jsonrpc":"2.0","id":null,"error":{}}`:                             {},
		`not json at all`:                                                    {},
	} {
		got, ok := FindID([]byte(prefix))
		assert.Equal(t, !want.IsZero(), ok, prefix)
		assert.Equal(t, want, got, prefix)
	}
}
