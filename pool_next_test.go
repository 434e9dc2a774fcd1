package mcpvisor

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// observable is everything a pool tells callers, for comparing pools
// built different ways.
func observable(p *pool) map[string]any {
	return map[string]any{
		"builtins": orNil(p.builtins), "tools": orNil(p.tools), "prompts": orNil(p.prompts), "resources": orNil(p.resources), "templates": orNil(p.templates),
		"toolsByName": maps.Collect(p.toolsByName.All()), "promptsByName": maps.Collect(p.promptsByName.All()),
		"hiddenTools": maps.Collect(p.hiddenTools.All()), "off": maps.Collect(p.off.All()), "offRoutes": maps.Collect(p.offRoutes.All()),
		"collisions": p.collisions, "renamed": p.renamed, "offered": maps.Collect(p.offered.All()), "views": maps.Collect(p.views.All()),
	}
}

// orNil makes empty and nil lists alike.
func orNil[T any](list []T) []T {
	if len(list) == 0 {
		return nil
	}
	return list
}

// nextPool, the one way a pool is made (the changed servers' entries
// replaced, or a rebase), gives the pool and the events that building the
// pool whole and diffing it gives (the reference, buildPool and
// diffPools), through any sequence of changes: servers added, removed,
// toggled, relisting, parked, recovering — with names that collide now
// and then (s.1 and s_1 sanitize alike; tool "x" of each).
func TestNextPoolMatchesAWholeBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	oneBuiltin := []BuiltinTool{{Definition: protocol.Tool{Name: "mcp__b0__x"}}} // a built-in holding a server's name
	twoBuiltins := append(slices.Clone(oneBuiltin), BuiltinTool{Definition: protocol.Tool{Name: "mcp__c__t1"}})
	builtins, maxDescription := oneBuiltin, 40
	names := []string{"a", "b0", "b1", "b2", "b3", "c", "d", "s.1", "s_1", "e", "f", "g"}
	handles := map[string]*serverHandle{}
	off := map[string]bool{}
	configured := map[string]bool{}
	list := func(v *serverView) {
		v.lists = lists{}
		for i := range 1 + rng.IntN(4) {
			v.lists.tools = append(v.lists.tools, protocol.Tool{Name: fmt.Sprintf("t%d", rng.IntN(6)+i*10), Description: fmt.Sprint(rng.IntN(3)) + strings.Repeat("d", 35*rng.IntN(2))}) // some cut by one cap of the two
		}
		if rng.IntN(3) == 0 {
			v.lists.tools = append(v.lists.tools, protocol.Tool{Name: "x"})
		}
		for i := range rng.IntN(3) {
			v.lists.prompts = append(v.lists.prompts, protocol.Prompt{Name: fmt.Sprintf("p%d", i)})
		}
		for i := range rng.IntN(3) {
			v.lists.resources = append(v.lists.resources, protocol.Resource{URI: fmt.Sprintf("file:///%d", i), Name: fmt.Sprint(rng.IntN(2))})
		}
		if rng.IntN(4) == 0 {
			v.lists.templates = append(v.lists.templates, protocol.ResourceTemplate{URITemplate: "file:///{x}"})
		}
	}
	step := func() {
		name := names[rng.IntN(len(names))]
		h := handles[name]
		switch op := rng.IntN(10); {
		case h == nil || !configured[name]:
			h = &serverHandle{name: name}
			v := &serverView{name: name, state: StateReady}
			list(v)
			h.view.Store(v)
			handles[name], configured[name] = h, true
		case op == 0:
			configured[name] = false
		case op == 1:
			off[name] = !off[name]
		case op < 5: // relisted
			v := *h.view.Load()
			list(&v)
			h.view.Store(&v)
		case op < 7: // a new view with the same lists
			v := *h.view.Load()
			v.attempt++
			h.view.Store(&v)
		case op == 7: // parked: routed, not offered
			v := *h.view.Load()
			v.state, v.recovering = StateFailed, false
			h.view.Store(&v)
		case op == 8: // reconnecting after it was ready: still offered
			v := *h.view.Load()
			v.state, v.recovering = StateReconnecting, true
			h.view.Store(&v)
		default: // ready again
			v := *h.view.Load()
			v.state, v.recovering = StateReady, false
			h.view.Store(&v)
		}
	}
	servers := func() []poolServer {
		var out []poolServer
		for _, name := range names {
			if configured[name] {
				out = append(out, poolServer{name: name, h: handles[name], off: off[name]})
			}
		}
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out
	}
	incremental, whole := poolOf(nil, builtins, maxDescription, nil), buildPool(nil, builtins, maxDescription, nil)
	updated := 0
	for i := range 3000 {
		for range 1 + rng.IntN(2) {
			step()
		}
		switch rng.IntN(60) { // now and then, new built-ins or a new cap
		case 0:
			if len(builtins) == 1 {
				builtins = twoBuiltins
			} else {
				builtins = oneBuiltin
			}
		case 1:
			maxDescription = 70 - maxDescription // 40 ↔ 30
		}
		ss := servers()
		if extends(slices.Clone(ss), builtins, maxDescription, incremental) {
			updated++
		}
		p, evs := nextPool(slices.Clone(ss), builtins, maxDescription, incremental)
		w := buildPool(slices.Clone(ss), builtins, maxDescription, whole)
		wevs := diffPools(whole, w)
		require.Equal(t, observable(w), observable(p), "step %d: the pool", i)
		require.Equal(t, wevs, evs, "step %d: the events", i)
		incremental, whole = p, w
	}
	require.Greater(t, updated, 1000, "most steps replace the changed servers' entries, without a rebase")
}

// extends reports whether nextPool makes the pool for servers by
// replacing the changed servers' entries in prev, without a rebase.
func extends(servers []poolServer, builtins []BuiltinTool, maxDescription int, prev *pool) bool {
	if !prev.extendable(builtins, maxDescription) {
		return false
	}
	changes, ok := changesSince(prev, servers)
	if !ok {
		return false
	}
	_, _, ok = applyChanges(prev, prev, changes, maxDescription, false)
	return ok
}

// BenchmarkPoolUpdate: one server of n (five tools each) relists, and the
// pool follows: nextPool (update), and the same steps in a rebase, which
// count every server as changed (what a first pool or a collision costs).
func BenchmarkPoolUpdate(b *testing.B) {
	for _, n := range []int{100, 1000} {
		servers := make([]poolServer, n)
		for i := range servers {
			servers[i] = fakeServer(fmt.Sprintf("server-%04d", i), ServerConfig{}, []string{"echo", "add", "fail", "sleep", "announce"})
		}
		relist := func(i int) {
			h := servers[i%n].h
			v := *h.view.Load()
			v.lists.tools = slices.Clone(v.lists.tools)
			v.lists.tools[0].Description = fmt.Sprint(i)
			h.view.Store(&v)
		}
		b.Run(fmt.Sprintf("servers=%d/rebase", n), func(b *testing.B) {
			p := poolOf(slices.Clone(servers), nil, 2048, nil)
			for i := 0; b.Loop(); i++ {
				relist(i)
				p, _, _ = applyChanges(p, builtinPool(nil, 2048), allChanges(p, slices.Clone(servers)), 2048, true)
			}
		})
		b.Run(fmt.Sprintf("servers=%d/update", n), func(b *testing.B) {
			p := poolOf(slices.Clone(servers), nil, 2048, nil)
			for i := 0; b.Loop(); i++ {
				relist(i)
				p, _ = nextPool(slices.Clone(servers), nil, 2048, p)
			}
		})
	}
}
