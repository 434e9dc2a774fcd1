package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/transports"
)

// add reads the table of transport kinds; every registered kind answers
// what the lists it replaced answered: stdio takes a command, http and sse
// an http or https URL, ws also a ws or wss one, each with its label; a
// kind that is neither (sdk) cannot be added. A kind registered without a
// row here fails the test, so the table and these answers cannot drift.
func TestAddReadsTheKindsTable(t *testing.T) {
	t.Parallel()
	old := map[transports.Type]struct {
		command bool
		schemes []string // nil: not a URL kind
		label   string
	}{
		"stdio": {command: true, label: "stdio"},
		"http":  {schemes: []string{"http", "https"}, label: "HTTP"},
		"sse":   {schemes: []string{"http", "https"}, label: "SSE"},
		"ws":    {schemes: []string{"http", "https", "ws", "wss"}, label: "WebSocket"},
		"sdk":   {label: "in-process"},
	}
	for _, k := range transports.Kinds() {
		w, ok := old[k.Type]
		require.True(t, ok, "kind %q is registered but has no row here", k.Type)
		fl := addFlags{transport: string(k.Type)}
		assert.Equal(t, w.label, transportLabel(string(k.Type)))
		switch {
		case w.command:
			e, err := newEntry(fl, "c", []string{"a"})
			require.NoError(t, err, k.Type)
			assert.Equal(t, addedEntry{Type: string(k.Type), Command: "c", Args: []string{"a"}}, e)
			_, err = newEntry(fl, "https://h.example/mcp", nil)
			assert.NoError(t, err, "%s takes a command that looks like a URL (with a warning)", k.Type)
		case w.schemes != nil:
			for _, scheme := range []string{"http", "https", "ws", "wss", "ftp"} {
				e, err := newEntry(fl, scheme+"://h.example/mcp", nil)
				want := false
				for _, s := range w.schemes {
					want = want || s == scheme
				}
				if want {
					require.NoError(t, err, "%s with a %s URL", k.Type, scheme)
					assert.Equal(t, addedEntry{Type: string(k.Type), URL: scheme + "://h.example/mcp"}, e)
					assert.True(t, looksLikeURL(scheme+"://h.example/mcp"), scheme)
				} else {
					assert.ErrorContains(t, err, "is not a "+string(k.Type)+" URL", "%s with a %s URL", k.Type, scheme)
				}
			}
		default:
			_, err := newEntry(fl, "c", nil)
			assert.EqualError(t, err, `--transport "`+string(k.Type)+`": want stdio, http, sse or ws`)
		}
	}
	assert.False(t, looksLikeURL("ftp://h.example/mcp"))
}
