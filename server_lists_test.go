package mcpvisor

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/toolcache"
)

// A server whose tools/list answers an error stays ready without tools,
// the error in its status and in an event; the listing is retried on the
// same connection after each backoff delay (1 s, 2 s, 4 s on the
// bubble's clock, no jitter), and the tools arrive with a tools_changed
// event when it succeeds. Prompts the same way.
// testwait:ok: it runs in a synctest bubble, whose sleeps and
// synctest.Wait are on the fake clock.
func TestARefusedListingIsRetriedOnTheLiveConnection(t *testing.T) {
	opts := testOptions
	opts.Reconnect = ReconnectPolicy{InitialDelay: Duration(time.Second), Multiplier: 2, MaxDelay: Duration(time.Minute), Jitter: -1}
	servers := map[string]mockserver.Options{
		// A handshake era: a 2026-07-28 server's listen stream would
		// list tools once more when acknowledged, one more refusal.
		"tools":   {FailLists: 3, Versions: []string{protocol.Version20251125}},
		"prompts": {Prompts: 2, FailLists: 1, FailListMethod: protocol.MethodPromptsList},
	}
	inBubble(t, opts, servers, func(t *testing.T, s *Supervisor) {
		events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
		promptEvents := s.reg.subscribeRecords(t.Context(), false, 0, 256)
		settleInBubble(t, s, map[string]ServerConfig{"tools": inProcess(), "prompts": inProcess()})
		synctest.Wait()

		st := statusOf(s, "tools")
		require.Equal(t, StateReady, st.State, "a refused listing does not fail the connect: %s", st.LastError)
		assert.Zero(t, st.ToolCount)
		assert.False(t, hasTool(s, "mcp__tools__echo"))
		require.Len(t, st.ListErrors, 1)
		assert.Equal(t, "tools", st.ListErrors[0].List)
		assert.Contains(t, st.ListErrors[0].Error, "tools/list")
		assert.Contains(t, st.ListErrors[0].Error, "fails (1 of 3")
		assert.Equal(t, 1, st.ListErrors[0].Failures, "%+v", st.ListErrors)
		assert.Empty(t, st.LastError, "the connection itself is fine")
		h, err := s.handle("tools")
		require.NoError(t, err)
		gen := h.view.Load().gen

		ev := nextEvent(t, events, EventListFailed, "tools")
		assert.Equal(t, "tools", ev.List)
		assert.Contains(t, ev.Err, "fails (1 of 3")

		time.Sleep(time.Second) // the first retry: refused again
		synctest.Wait()
		assert.Equal(t, 2, statusOf(s, "tools").ListErrors[0].Failures)
		time.Sleep(2 * time.Second) // the second: refused again
		synctest.Wait()
		assert.Equal(t, 3, statusOf(s, "tools").ListErrors[0].Failures)
		assert.False(t, hasTool(s, "mcp__tools__echo"))
		time.Sleep(4*time.Second - time.Millisecond)
		synctest.Wait()
		assert.False(t, hasTool(s, "mcp__tools__echo"), "not before its delay")
		time.Sleep(time.Millisecond) // the third: listed
		synctest.Wait()

		st = statusOf(s, "tools")
		assert.Equal(t, StateReady, st.State)
		assert.Empty(t, st.ListErrors)
		assert.Equal(t, 5, st.ToolCount)
		assert.True(t, hasTool(s, "mcp__tools__echo"))
		assert.Equal(t, gen, h.view.Load().gen, "the same connection throughout")
		changed := nextEvent(t, events, EventToolsChanged, "tools")
		assert.Contains(t, changed.Diff.Added, "mcp__tools__echo")

		// Prompts: refused once, retried after 1 s; the tools were there
		// all along.
		assert.True(t, hasTool(s, "mcp__prompts__echo"))
		assert.Equal(t, 2, statusOf(s, "prompts").Prompts)
		assert.Empty(t, statusOf(s, "prompts").ListErrors)
		assert.Equal(t, "prompts", nextEvent(t, promptEvents, EventListFailed, "prompts").List)
	})
}

// The same through a real process: the mock refuses tools/list twice,
// the server stays connected, and its tools arrive.
func TestARefusedToolListingThroughAProcess(t *testing.T) {
	s := start(t, testOptions)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	setAndSettle(t, s, map[string]ServerConfig{"m": mock("-fail-lists", "2")})
	failed := nextEvent(t, events, EventListFailed, "m")
	assert.Equal(t, "tools", failed.List)
	changed := nextEvent(t, events, EventToolsChanged, "m")
	assert.Contains(t, changed.Diff.Added, "mcp__m__echo")
	st := statusOf(s, "m")
	assert.Equal(t, StateReady, st.State)
	assert.Empty(t, st.ListErrors)
	assert.Zero(t, st.Attempt, "no reconnect")
	res, err := call(t, s, "mcp__m__echo", "hi")
	require.NoError(t, err)
	assert.Equal(t, "hi", res.Content[0].Text)
}

// storeRecorder is a discovery cache that tells of every Store, over a
// real one.
type storeRecorder struct {
	DiscoveryCache
	stored chan []protocol.Tool
}

func (r *storeRecorder) Store(server, configHash string, tools []protocol.Tool) error {
	r.stored <- tools
	return r.DiscoveryCache.Store(server, configHash, tools)
}

// A lazy server whose listing is refused keeps its tools in the discovery
// cache: what is stored is the next listing that works, never the empty
// list of the refusal.
func TestARefusedListingKeepsTheDiscoveryCache(t *testing.T) {
	cache := &storeRecorder{DiscoveryCache: toolcache.New(t.TempDir(), nil), stored: make(chan []protocol.Tool, 8)}
	cfg := mock("-name", "lz", "-fail-lists", "1", "-versions", protocol.Version20251125)
	cfg.Lazy = true
	echo := protocol.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}
	require.NoError(t, cache.DiscoveryCache.Store("lz", ConfigHash(cfg), []protocol.Tool{echo}))
	opts := testOptions
	opts.DiscoveryCache = cache
	s := start(t, opts)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 256)
	setAndSettle(t, s, map[string]ServerConfig{"lz": cfg})
	require.True(t, hasTool(s, "mcp__lz__echo"), "offered from the cache before first use")

	res, err := call(t, s, "mcp__lz__echo", "woken")
	require.NoError(t, err)
	assert.Equal(t, "woken", res.Content[0].Text)
	nextEvent(t, events, EventListFailed, "lz")
	stored := testwait.Recv(t, cache.stored, "the discovery cache to be written")
	assert.Len(t, stored, 5, "the listing that worked is stored, not the refusal's empty list")
}
