package mcpvisor

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServerLoggerNamesTheServerOnEveryEvent(t *testing.T) {
	var buf bytes.Buffer
	parent := zerolog.New(&buf).With().Str("host", "h").Logger()
	log := serverLogger(parent, "alpha")
	log.Info().Str("k", "v").Msg("one")
	child := log.With().Str("transport", "stdio").Logger() // as the transports derive theirs
	child.Warn().Msg("two")
	parent.Info().Msg("three")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3)
	for i, want := range []map[string]any{
		{"host": "h", "server": "alpha", "k": "v", "message": "one"},
		{"host": "h", "server": "alpha", "transport": "stdio", "message": "two"},
	} {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[i]), &m))
		for k, v := range want {
			assert.Equal(t, v, m[k], "%s in %s", k, lines[i])
		}
		assert.Equal(t, 1, strings.Count(lines[i], `"server":`), lines[i])
	}
	assert.NotContains(t, lines[2], `"server"`, "the parent is not changed")

	// The zero logger (Options' default) stays silent.
	zero := serverLogger(zerolog.Logger{}, "alpha")
	zero.Error().Msg("nothing")
}
