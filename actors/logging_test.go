package actors

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProtoactorLogsReachZerologWithOneMessageField(t *testing.T) {
	var buf bytes.Buffer
	log := newSlogLogger(zerolog.New(&buf))
	secret := ServerConfig{}
	secret.Env = map[string]string{"TOKEN": "s3cr3t"}
	log.With("message", "bound").Info("[DeadLetter]", slog.Any("message", secret), slog.String("pid", "p1"))

	line := strings.TrimSpace(buf.String())
	assert.Equal(t, 1, strings.Count(line, `"message":`), "protoactor's message attribute must not duplicate zerolog's: %s", line)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &m))
	assert.Equal(t, "[DeadLetter]", m["message"])
	assert.Equal(t, "protoactor", m["lib"])
	assert.Equal(t, "p1", m["pid"])
	assert.Contains(t, line, `"actor_message":"actors.ServerConfig"`, "only the message's type is logged")
	assert.Contains(t, line, `"actor_message":"string"`)
	assert.NotContains(t, line, "s3cr3t", "a message's contents never reach the log")
}

func TestZeroLoggerLogsNothing(t *testing.T) {
	log := newSlogLogger(zerolog.Logger{})
	log.Error("nothing to see") // must not panic or write anywhere
}

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
