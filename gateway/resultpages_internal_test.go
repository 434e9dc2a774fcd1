package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/protocol"
)

func fitGateway(o Options) *Gateway {
	return &Gateway{opts: o, pages: newResultPages(o, nil)}
}

// An image block is never cut: kept whole or left out, and so is
// everything after it; structuredContent is kept whole when it fits and
// left out whole (said so in the note) when it does not; the pages hold
// the image whole and the structured content as its own last page.
func TestFitKeepsBlocksWhole(t *testing.T) {
	g := fitGateway(Options{MaxResultChars: 1000})
	img := protocol.Content{Type: "image", MimeType: "image/png", Data: strings.Repeat("A", 1200)}
	sc := json.RawMessage(`{"rows":[` + strings.Repeat(`"v",`, 200) + `"v"]}`)
	res := &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent("intro\n"), img, protocol.TextContent("after")}, StructuredContent: sc}
	out := g.pages.fitResult("", "mcp__s__t", "s", nil, res)
	require.Len(t, out.Content, 2, "the intro, then the note")
	assert.Equal(t, "intro\n", out.Content[0].Text)
	assert.Nil(t, out.StructuredContent)
	note := out.Content[1].Text
	assert.Contains(t, note, "structuredContent")
	assert.Contains(t, note, "2 content blocks")
	assert.Len(t, res.Content, 3, "the original is not changed")

	r := g.pages.store.order.Front().Value.(*storedResult)
	require.Len(t, r.pages, 3, "the image alone (larger than a page), the text, the structured content")
	assert.Equal(t, img, r.pages[0].content[0])
	assert.Equal(t, "after", r.pages[1].content[0].Text)
	assert.JSONEq(t, string(sc), string(r.pages[2].structured))

	// Small structured content that fits is kept whole beside cut text.
	small := json.RawMessage(`{"n":1}`)
	res = &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(strings.Repeat("word ", 400))}, StructuredContent: small}
	out = g.pages.fitResult("", "mcp__s__t", "s", nil, res)
	assert.Equal(t, small, out.StructuredContent)
	assert.True(t, strings.HasSuffix(out.Content[0].Text, " "), "cut after a word")
}

// cutText cuts at a line break, else a space, else a character, never
// inside a UTF-8 sequence.
func TestCutTextBoundaries(t *testing.T) {
	h, tl := cutText("aaaa\nbbbb\ncccc", 12)
	assert.Equal(t, "aaaa\nbbbb\n", h)
	assert.Equal(t, "cccc", tl)
	h, _ = cutText("one two three four", 10)
	assert.Equal(t, "one two ", h)
	h, tl = cutText(strings.Repeat("é", 10), 4)
	assert.Equal(t, "éééé", h)
	assert.Equal(t, strings.Repeat("é", 6), tl)
}

// The store is bounded in bytes (the oldest is evicted first) and in
// time.
func TestResultStoreBounds(t *testing.T) {
	now := time.Unix(1000, 0)
	st := newResultStore(1000, time.Minute)
	st.now = func() time.Time { return now }
	a := st.put(&storedResult{bytes: 600})
	b := st.put(&storedResult{bytes: 300})
	require.NotNil(t, st.get(a))
	c := st.put(&storedResult{bytes: 300}) // over 1000: a goes
	assert.Nil(t, st.get(a))
	assert.NotNil(t, st.get(b))
	assert.NotNil(t, st.get(c))
	assert.Empty(t, st.put(&storedResult{bytes: 2000}), "larger than the store: not kept")
	n, bytes := st.stats()
	assert.Equal(t, 2, n)
	assert.EqualValues(t, 600, bytes)
	now = now.Add(time.Minute)
	assert.Nil(t, st.get(b), "expired")
	n, bytes = st.stats()
	assert.Zero(t, n)
	assert.Zero(t, bytes)
}
