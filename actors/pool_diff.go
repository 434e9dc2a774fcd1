package actors

import (
	"maps"
	"reflect"
	"slices"
)

// poolItem is one entry of a pool list, for diffing: the server offering
// it, its pool name, and what a change of it means.
type poolItem struct {
	server, name string
	def          any
}

// diffPools returns the events that tell subscribers how the pool changed
// from old to p: per server and kind, one *_changed event with its diff
// (servers in name order; tools, then prompts, then resources), then one
// collision event per rename that old did not make.
func diffPools(old, p *pool) []Event {
	toolItems := func(p *pool) []poolItem {
		out := make([]poolItem, len(p.tools))
		for i, t := range p.tools {
			out[i] = poolItem{t.Server, t.Name, &t.Definition} // a pointer: boxing it allocates nothing
		}
		return out
	}
	promptItems := func(p *pool) []poolItem {
		out := make([]poolItem, len(p.prompts))
		for i := range p.prompts {
			pr := &p.prompts[i]
			out[i] = poolItem{pr.Server, pr.Name, &pr.Prompt}
		}
		return out
	}
	resourceItems := func(p *pool) []poolItem {
		out := make([]poolItem, 0, len(p.resources)+len(p.templates))
		for i := range p.resources {
			r := &p.resources[i]
			out = append(out, poolItem{r.Server, r.Resource.URI, &r.Resource})
		}
		for i := range p.templates {
			t := &p.templates[i]
			out = append(out, poolItem{t.Server, t.Template.URITemplate, &t.Template})
		}
		return out
	}
	// Servers whose view kept its offer list the same definitions: only
	// their names can differ (a collision), so their entries are compared
	// by name alone.
	sameOffer := map[string]bool{}
	for h, pv := range p.views {
		if pv.offer != nil && old.views[h].offer == pv.offer {
			sameOffer[pv.view.name] = true
		}
	}
	tools := diffItems(toolItems(old), toolItems(p), sameOffer)
	prompts := diffItems(promptItems(old), promptItems(p), sameOffer)
	resources := diffItems(resourceItems(old), resourceItems(p), sameOffer)
	servers := map[string]bool{}
	for _, m := range []map[string]*ListDiff{tools, prompts, resources} {
		for s := range m {
			servers[s] = true
		}
	}
	var evs []Event
	for _, s := range slices.Sorted(maps.Keys(servers)) {
		if d := tools[s]; d != nil {
			evs = append(evs, Event{Type: EventToolsChanged, Server: s, Diff: d, Tools: len(p.tools)})
		}
		if d := prompts[s]; d != nil {
			evs = append(evs, Event{Type: EventPromptsChanged, Server: s, Diff: d})
		}
		if d := resources[s]; d != nil {
			evs = append(evs, Event{Type: EventResourcesChanged, Server: s, Diff: d})
		}
	}
	seen := map[Collision]bool{}
	for _, c := range old.collisions {
		seen[c] = true
	}
	for _, c := range p.collisions {
		if !seen[c] {
			evs = append(evs, Event{Type: EventCollision, Server: c.Server, Collision: &c})
		}
	}
	return evs
}

// diffItems compares two lists by (server, name) and returns the non-empty
// diffs by server, each slice sorted. Definitions of the servers in
// sameDefs are known to be unchanged.
func diffItems(old, cur []poolItem, sameDefs map[string]bool) map[string]*ListDiff {
	type key struct{ server, name string }
	before := make(map[key]any, len(old))
	for _, it := range old {
		before[key{it.server, it.name}] = it.def
	}
	diffs := map[string]*ListDiff{}
	diff := func(server string) *ListDiff {
		d := diffs[server]
		if d == nil {
			d = &ListDiff{}
			diffs[server] = d
		}
		return d
	}
	for _, it := range cur {
		k := key{it.server, it.name}
		prev, existed := before[k]
		switch {
		case !existed:
			diff(it.server).Added = append(diff(it.server).Added, it.name)
		case !sameDefs[it.server] && !reflect.DeepEqual(prev, it.def):
			diff(it.server).Changed = append(diff(it.server).Changed, it.name)
		}
		delete(before, k)
	}
	for k := range before {
		diff(k.server).Removed = append(diff(k.server).Removed, k.name)
	}
	for _, d := range diffs {
		slices.Sort(d.Added)
		slices.Sort(d.Removed)
		slices.Sort(d.Changed)
	}
	return diffs
}
