package mcpvisor

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/protocol"
)

func TestQualifiedNamesFitSixtyFourCharactersAndStayDistinct(t *testing.T) {
	assert.Equal(t, "mcp__github__create_issue", QualifiedName("github", "create_issue"))
	assert.Equal(t, "mcp__my_server__t_o_o_l", QualifiedName("my.server", "t.o/o l"), "characters outside [A-Za-z0-9_-] become _")
	assert.Equal(t, "mcp__s__caf__", QualifiedName("s", "café!"), "one _ per character, not per byte")

	long := strings.Repeat("x", 80)
	a, b := QualifiedName("server", long+"_a"), QualifiedName("server", long+"_b")
	assert.Len(t, a, MaxNameLength)
	assert.Len(t, b, MaxNameLength)
	assert.NotEqual(t, a, b, "tools that share a long prefix keep distinct names")
	assert.Equal(t, a, QualifiedName("server", long+"_a"), "shortening is deterministic")
	assert.True(t, strings.HasPrefix(a, "mcp__server__xxx"), "a shortened name keeps its readable start: %s", a)

	exact := "mcp__s__" + strings.Repeat("y", MaxNameLength-len("mcp__s__"))
	assert.Equal(t, exact, QualifiedName("s", strings.Repeat("y", MaxNameLength-len("mcp__s__"))), "64 characters exactly is not shortened")
}

func TestDescriptionsAreCappedOnACharacterBoundary(t *testing.T) {
	assert.Equal(t, "short", capDescription("short", 10))
	assert.Equal(t, "no cap", capDescription("no cap", -1))
	got := capDescription(strings.Repeat("é", 100), 51)
	assert.LessOrEqual(t, len(got), 51)
	assert.True(t, utf8.ValidString(got), "never cuts a character in half")
	assert.True(t, strings.HasSuffix(got, "…"), "says it was cut")
}

// fakeServer is a server handle with a ready view offering tools and
// prompts, for building pools without processes.
func fakeServer(name string, cfg ServerConfig, tools []string, prompts ...string) poolServer {
	h := &serverHandle{name: name}
	v := &serverView{name: name, cfg: cfg, state: StateReady}
	for _, t := range tools {
		v.lists.tools = append(v.lists.tools, protocol.Tool{Name: t, Description: "tool " + t})
	}
	for _, p := range prompts {
		v.lists.prompts = append(v.lists.prompts, protocol.Prompt{Name: p})
	}
	h.view.Store(v)
	return poolServer{name: name, h: h}
}

// poolOf is the pool nextPool makes of servers after prev.
func poolOf(servers []poolServer, builtins []BuiltinTool, maxDescription int, prev *pool) *pool {
	p, _ := nextPool(servers, builtins, maxDescription, prev)
	return p
}

func namesIn(p *pool) map[string]string {
	out := map[string]string{}
	for _, t := range p.builtins {
		out[t.Name] = "built-in"
	}
	for _, t := range p.tools {
		out[t.Name] = t.Server + "/" + t.Definition.Name
	}
	return out
}

func TestCollisionsAreResolvedTheSameWayWhateverTheOrder(t *testing.T) {
	// "my.server" and "my_server" both sanitize to my_server; the first by
	// name ("my.server" < "my_server") keeps mcp__my_server__x.
	servers := func() []poolServer {
		return []poolServer{
			fakeServer("my_server", ServerConfig{}, []string{"x", "y"}),
			fakeServer("my.server", ServerConfig{}, []string{"x"}),
		}
	}
	p := poolOf(servers(), nil, 0, nil)
	names := namesIn(p)
	require.Len(t, names, 3, "nothing is dropped: the loser is renamed")
	assert.Equal(t, "my.server/x", names["mcp__my_server__x"])
	assert.Equal(t, "my_server/y", names["mcp__my_server__y"])
	require.Len(t, p.collisions, 1)
	c := p.collisions[0]
	assert.Equal(t, Collision{Kind: "tool", Name: "mcp__my_server__x", Holder: "my.server/x", Server: "my_server", Original: "x", Renamed: c.Renamed}, c)
	assert.LessOrEqual(t, len(c.Renamed), MaxNameLength)
	assert.Equal(t, "my_server/x", names[c.Renamed])

	reversed := servers()
	reversed[0], reversed[1] = reversed[1], reversed[0]
	assert.Equal(t, names, namesIn(poolOf(reversed, nil, 0, nil)), "the same servers give the same names in any order")

	// Calls route by the assigned names.
	e, _ := p.toolsByName.Get(c.Renamed)
	assert.Equal(t, "x", e.name)
	assert.Equal(t, "my_server", e.h.name)
}

func TestHostBuiltinsWinCollisionsAndAreListedFirst(t *testing.T) {
	builtins := []BuiltinTool{
		{Definition: protocol.Tool{Name: "Read"}},
		{Definition: protocol.Tool{Name: "mcp__fs__read"}}, // a host that chose an MCP-like name
	}
	p := poolOf([]poolServer{fakeServer("fs", ServerConfig{}, []string{"read", "write"})}, builtins, 0, nil)
	assert.Equal(t, "built-in", namesIn(p)["mcp__fs__read"])
	require.Len(t, p.collisions, 1)
	assert.Equal(t, "built-in", p.collisions[0].Holder)
	assert.Equal(t, "fs/read", namesIn(p)[p.collisions[0].Renamed])

	var order []string
	for _, t := range p.builtins {
		order = append(order, t.Name)
	}
	for _, t := range p.tools {
		order = append(order, t.Name)
	}
	require.Len(t, order, 4)
	assert.Equal(t, []string{"Read", "mcp__fs__read"}, order[:2], "built-ins first, sorted by name")
	assert.True(t, p.builtins[0].Builtin)
}

func TestPoolAppliesFiltersTrustAndTheDescriptionCap(t *testing.T) {
	cfg := ServerConfig{Trust: "trusted", Tools: ToolFilter{Allow: []string{"get_*", "list"}, Deny: []string{"get_secret"}}}
	s := fakeServer("api", cfg, []string{"get_user", "get_secret", "list", "delete"}, "summarize")
	s.h.view.Load().lists.tools[0].Description = strings.Repeat("d", 5000)
	p := poolOf([]poolServer{s}, nil, 100, nil)
	assert.Equal(t, map[string]string{"mcp__api__get_user": "api/get_user", "mcp__api__list": "api/list"}, namesIn(p))
	for _, tool := range p.tools {
		assert.True(t, tool.Trusted)
		assert.LessOrEqual(t, len(tool.Definition.Description), 100)
	}
	assert.Len(t, s.h.view.Load().lists.tools[0].Description, 5000, "the server's own list is not modified")
	require.Len(t, p.prompts, 1)
	assert.Equal(t, "mcp__api__summarize", p.prompts[0].Name, "prompts are named like tools")
}

func TestDiffsNameWhatWasAddedRemovedAndChanged(t *testing.T) {
	before := poolOf([]poolServer{
		fakeServer("a", ServerConfig{}, []string{"keep", "drop", "edit"}),
		fakeServer("b", ServerConfig{}, []string{"same"}),
	}, nil, 0, nil)
	a := fakeServer("a", ServerConfig{}, []string{"keep", "edit", "new"})
	a.h.view.Load().lists.tools[1].Description = "edited"
	after, evs := nextPool([]poolServer{a, fakeServer("b", ServerConfig{}, []string{"same"})}, nil, 0, before)

	require.Len(t, evs, 1, "only the server whose tools changed gets an event")
	assert.Equal(t, EventToolsChanged, evs[0].Type)
	assert.Equal(t, "a", evs[0].Server)
	assert.Equal(t, &ListDiff{Added: []string{"mcp__a__new"}, Removed: []string{"mcp__a__drop"}, Changed: []string{"mcp__a__edit"}}, evs[0].Diff)
	assert.Equal(t, 4, evs[0].Tools)
	_, evs = nextPool(slices.Collect(maps.Values(maps.Collect(after.parts.All()))), nil, 0, after)
	assert.Empty(t, evs, "an unchanged pool has no diff")
}

// A renamed tool keeps its name for routing when its server stops
// offering it: parked (a call by that name wakes the server) or toggled
// off (a call by that name is refused as such).
func TestARenamedToolIsRoutedByItsNameAfterItsServerLeavesThePool(t *testing.T) {
	holder := fakeServer("my.server", ServerConfig{}, []string{"x"})
	loser := fakeServer("my_server", ServerConfig{}, []string{"x"})
	p := poolOf([]poolServer{holder, loser}, nil, 0, nil)
	require.Len(t, p.collisions, 1)
	renamed := p.collisions[0].Renamed

	parked := *loser.h.view.Load()
	parked.state = StateFailed
	loser.h.view.Store(&parked)
	p = poolOf([]poolServer{holder, loser}, nil, 0, p)
	e, _ := p.hiddenTools.Get(renamed)
	assert.Equal(t, "x", e.name, "a call by the renamed name still wakes the parked server")
	wrong := p.hiddenTools.Has("mcp__my_server__x")
	assert.False(t, wrong, "the holder's name is not routed to the parked server")

	p = poolOf([]poolServer{holder, loser}, nil, 0, p)
	e, _ = p.hiddenTools.Get(renamed)
	assert.Equal(t, "x", e.name, "remembered across rebuilds")

	ready := parked
	ready.state = StateReady
	loser.h.view.Store(&ready)
	loser.off = true
	p = poolOf([]poolServer{holder, loser}, nil, 0, p)
	server, _ := p.offRoutes.Get(renamed)
	assert.Equal(t, "my_server", server, "toggled off: refused under the name the model knows")
}

// A deferred server's tools are in the pool, marked Deferred; another
// server's are not.
func TestPoolMarksADeferredServersTools(t *testing.T) {
	p := poolOf([]poolServer{
		fakeServer("big", ServerConfig{Defer: true}, []string{"a", "b"}),
		fakeServer("small", ServerConfig{}, []string{"c"}),
	}, nil, 100, nil)
	deferred := map[string]bool{}
	for _, tool := range p.tools {
		deferred[tool.Name] = tool.Deferred
	}
	assert.Equal(t, map[string]bool{"mcp__big__a": true, "mcp__big__b": true, "mcp__small__c": false}, deferred)
}
