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
	// A message carrying a secret, as a server's config would.
	type serverConfig struct{ Env map[string]string }
	secret := serverConfig{Env: map[string]string{"TOKEN": "s3cr3t"}}
	log.With("message", "bound").Info("[DeadLetter]", slog.Any("message", secret), slog.String("pid", "p1"))

	line := strings.TrimSpace(buf.String())
	assert.Equal(t, 1, strings.Count(line, `"message":`), "protoactor's message attribute must not duplicate zerolog's: %s", line)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &m))
	assert.Equal(t, "[DeadLetter]", m["message"])
	assert.Equal(t, "protoactor", m["lib"])
	assert.Equal(t, "p1", m["pid"])
	assert.Contains(t, line, `"actor_message":"actors.serverConfig"`, "only the message's type is logged")
	assert.Contains(t, line, `"actor_message":"string"`)
	assert.NotContains(t, line, "s3cr3t", "a message's contents never reach the log")
}

func TestZeroLoggerLogsNothing(t *testing.T) {
	log := newSlogLogger(zerolog.Logger{})
	log.Error("nothing to see") // must not panic or write anywhere
}
