package actors

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// observable is everything a pool tells callers, for comparing pools
// built different ways.
func observable(p *pool) map[string]any {
	return map[string]any{
		"builtins": orNil(p.builtins), "tools": orNil(p.tools), "prompts": orNil(p.prompts), "resources": orNil(p.resources), "templates": orNil(p.templates),
		"toolsByName": p.toolsByName, "promptsByName": p.promptsByName, "hiddenTools": p.hiddenTools,
		"off": p.off, "offRoutes": p.offRoutes, "collisions": p.collisions, "renamed": p.renamed,
		"offered": p.offered, "views": p.views,
	}
}

// orNil makes empty and nil lists alike.
func orNil[T any](list []T) []T {
	if len(list) == 0 {
		return nil
	}
	return list
}

// nextPool, which replaces only the entries of the servers that changed,
// gives the pool and the events that building the pool whole and diffing
// it gives, through any sequence of changes: servers added, removed,
// toggled, relisting, parked, recovering — with names that collide now
// and then (s.1 and s_1 sanitize alike; tool "x" of each).
func TestIncrementalPoolMatchesAWholeBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	builtins := []BuiltinTool{{Definition: protocol.Tool{Name: "mcp__b0__x"}}} // a built-in holding a server's name
	names := []string{"a", "b0", "b1", "b2", "b3", "c", "d", "s.1", "s_1", "e", "f", "g"}
	handles := map[string]*serverHandle{}
	off := map[string]bool{}
	configured := map[string]bool{}
	list := func(v *serverView) {
		v.lists = lists{}
		for i := range 1 + rng.IntN(4) {
			v.lists.tools = append(v.lists.tools, protocol.Tool{Name: fmt.Sprintf("t%d", rng.IntN(6)+i*10), Description: fmt.Sprint(rng.IntN(3))})
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
	incremental, whole := buildPool(nil, builtins, 40, nil), buildPool(nil, builtins, 40, nil)
	updated := 0
	for i := range 3000 {
		for range 1 + rng.IntN(2) {
			step()
		}
		ss := servers()
		_, _, ok := updatePool(slices.Clone(ss), builtins, 40, incremental)
		if ok {
			updated++
		}
		p, evs := nextPool(slices.Clone(ss), builtins, 40, incremental)
		w := buildPool(slices.Clone(ss), builtins, 40, whole)
		wevs := diffPools(whole, w)
		require.Equal(t, observable(w), observable(p), "step %d: the pool", i)
		require.Equal(t, wevs, evs, "step %d: the events", i)
		incremental, whole = p, w
	}
	require.Greater(t, updated, 1000, "most steps take the incremental path")
}

// BenchmarkPoolUpdate: one server of n (five tools each) relists, and the
// pool follows — built whole and diffed, or updated (nextPool).
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
		b.Run(fmt.Sprintf("servers=%d/whole", n), func(b *testing.B) {
			p := buildPool(slices.Clone(servers), nil, 2048, nil)
			for i := 0; b.Loop(); i++ {
				relist(i)
				next := buildPool(slices.Clone(servers), nil, 2048, p)
				diffPools(p, next)
				p = next
			}
		})
		b.Run(fmt.Sprintf("servers=%d/update", n), func(b *testing.B) {
			p := buildPool(slices.Clone(servers), nil, 2048, nil)
			for i := 0; b.Loop(); i++ {
				relist(i)
				p, _ = nextPool(slices.Clone(servers), nil, 2048, p)
			}
		})
	}
}
