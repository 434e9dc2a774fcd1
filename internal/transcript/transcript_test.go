package transcript_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/transcript"
)

func frames() []transcript.Frame {
	return []transcript.Frame{
		{From: transcript.Client, Data: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)},
		{From: transcript.Server, Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[],"at":"2026-11-24T22:09:03.5Z","url":"http://127.0.0.1:40123/mcp","sessionId":"f00d"}}`)},
	}
}

// A transcript matches the run it was made from, and fails on a changed
// frame, a missing frame, an extra frame and a frame from the other side,
// naming the frame.
func TestDiffNamesTheFrameThatDiffers(t *testing.T) {
	golden := transcript.Format("a comment", frames())
	require.Empty(t, transcript.Diff(golden, frames()))

	changed := frames()
	changed[0].Data = []byte(strings.Replace(string(changed[0].Data), "tools/list", "tools/lust", 1))
	assert.Contains(t, transcript.Diff(golden, changed), "frame 1 differs")
	assert.Contains(t, transcript.Diff(golden, frames()[:1]), "frame 2: the run ended after 1 frames")
	assert.Contains(t, transcript.Diff(golden, append(frames(), frames()[0])), "frame 3: the transcript has 2 frames")
	swapped := frames()
	swapped[1].From = transcript.Client
	assert.Contains(t, transcript.Diff(golden, swapped), "frame 2 differs")
}

// What varies from run to run is normalized; the rest is kept as sent,
// member order included.
func TestNormalize(t *testing.T) {
	got := transcript.Normalize(frames()[1].Data)
	assert.Equal(t, `{
  "jsonrpc": "2.0",
  "id": 1,
  "result": {
    "tools": [],
    "at": "TIME",
    "url": "http://127.0.0.1:PORT/mcp",
    "sessionId": "VOLATILE"
  }
}
`, got)
	// Parse gives back the normalized frames Format wrote.
	parsed := transcript.Parse(transcript.Format("c", frames()))
	require.Len(t, parsed, 2)
	assert.Equal(t, got, string(parsed[1].Data))
	assert.True(t, slices.Equal([]string{parsed[0].From, parsed[1].From}, []string{"client", "server"}))
}
