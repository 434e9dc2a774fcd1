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
	log.With("message", "bound").Info("[DeadLetter]", slog.Int("message", 42), slog.String("pid", "p1"))

	line := strings.TrimSpace(buf.String())
	assert.Equal(t, 1, strings.Count(line, `"message":`), "protoactor's message attribute must not duplicate zerolog's: %s", line)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &m))
	assert.Equal(t, "[DeadLetter]", m["message"])
	assert.Equal(t, "protoactor", m["lib"])
	assert.Equal(t, "p1", m["pid"])
	assert.Contains(t, line, `"actor_message":42`)
	assert.Contains(t, line, `"actor_message":"bound"`)
}

func TestZeroLoggerLogsNothing(t *testing.T) {
	log := newSlogLogger(zerolog.Logger{})
	log.Error("nothing to see") // must not panic or write anywhere
}
