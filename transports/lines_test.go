package transports_test

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/transporttest"
)

func TestLastFrameWithoutItsNewline(t *testing.T) {
	tests := []struct {
		name, stream string
		want         []string
	}{
		{"complete frames", "{\"a\":1}\n{\"b\":2}\n", []string{`{"a":1}`, `{"b":2}`}},
		{"a valid last frame is delivered", "{\"a\":1}\n{\"b\":2}", []string{`{"a":1}`, `{"b":2}`}},
		{"a write cut short is dropped", "{\"a\":1}\n{\"jsonrpc\":\"2.0\",\"id\":7,\"res", []string{`{"a":1}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := transporttest.NewRecorder()
			err := transports.ReadLines(strings.NewReader(tt.stream), 1<<20, rec)
			require.ErrorIs(t, err, io.EOF)
			assert.Equal(t, tt.want, rec.Frames())
		})
	}
}
