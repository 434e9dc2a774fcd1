package mcpvisor

import (
	"reflect"
	"slices"
)

// poolItem is one entry of a pool list, for diffing: the server offering
// it, its pool name, and what a change of it means.
type poolItem struct {
	server, name string
	def          any
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

// changeEvents are the events of the changed servers, in name order (see
// nextPool): each server's entries in prev against those in p, under
// the names each pool gave them.
func changeEvents(prev, p *pool, changes []poolChange, olds, news []contribution) []eventRecord {
	var evs []eventRecord
	for i, c := range changes {
		if sameEntries(prev, p, c, olds[i], news[i]) {
			continue
		}
		var oldItems, curItems [3][]poolItem
		if c.old != nil {
			oldItems = olds[i].items(c.old.name, prev)
		}
		if c.cur != nil {
			curItems = news[i].items(c.cur.name, p)
		}
		same := map[string]bool{c.name: olds[i].offer != nil && olds[i].offer == news[i].offer}
		if d := diffItems(oldItems[0], curItems[0], same)[c.name]; d != nil {
			evs = append(evs, eventRecord{Type: EventToolsChanged, Server: c.name, Diff: d, Tools: len(p.tools)})
		}
		if d := diffItems(oldItems[1], curItems[1], same)[c.name]; d != nil {
			evs = append(evs, eventRecord{Type: EventPromptsChanged, Server: c.name, Diff: d})
		}
		if d := diffItems(oldItems[2], curItems[2], same)[c.name]; d != nil {
			evs = append(evs, eventRecord{Type: EventResourcesChanged, Server: c.name, Diff: d})
		}
	}
	if len(p.collisions) == 0 {
		return evs
	}
	seen := make(map[Collision]bool, len(prev.collisions))
	for _, c := range prev.collisions {
		seen[c] = true
	}
	for _, c := range p.collisions {
		if !seen[c] {
			evs = append(evs, eventRecord{Type: EventCollision, Server: c.Server, Collision: &c})
		}
	}
	return evs
}

// sameEntries reports, without listing them, that change c leaves its
// server's entries as they were: no offer before or after, or the same
// offer (the same definitions) under the same names.
func sameEntries(prev, p *pool, c poolChange, old, cur contribution) bool {
	was, is := old.offer != nil && !old.off, cur.offer != nil && !cur.off
	if !was && !is {
		return true
	}
	if !was || !is || old.offer != cur.offer || c.old == nil || c.cur == nil || c.old.name != c.cur.name {
		return false
	}
	if len(prev.renamed) == 0 && len(p.renamed) == 0 {
		return true
	}
	for _, t := range cur.offer.tools {
		if prev.offeredName("tool", c.name, t.tool.Definition.Name, t.tool.Name) != p.offeredName("tool", c.name, t.tool.Definition.Name, t.tool.Name) {
			return false
		}
	}
	for _, pr := range cur.offer.prompts {
		if prev.offeredName("prompt", c.name, pr.Prompt.Name, pr.Name) != p.offeredName("prompt", c.name, pr.Prompt.Name, pr.Name) {
			return false
		}
	}
	return true
}

// items lists a contribution's offered tools, prompts, and resources with
// templates, as diffItems compares them, under the names pool in gave
// them.
func (c contribution) items(server string, in *pool) (out [3][]poolItem) {
	if c.offer == nil || c.off {
		return out
	}
	for i := range c.offer.tools {
		t := &c.offer.tools[i]
		out[0] = append(out[0], poolItem{server, in.offeredName("tool", server, t.tool.Definition.Name, t.tool.Name), &t.tool.Definition})
	}
	for i := range c.offer.prompts {
		pr := &c.offer.prompts[i]
		out[1] = append(out[1], poolItem{server, in.offeredName("prompt", server, pr.Prompt.Name, pr.Name), &pr.Prompt})
	}
	for i := range c.offer.resources {
		r := &c.offer.resources[i]
		out[2] = append(out[2], poolItem{server, r.Resource.URI, &r.Resource})
	}
	for i := range c.offer.templates {
		t := &c.offer.templates[i]
		out[2] = append(out[2], poolItem{server, t.Template.URITemplate, &t.Template})
	}
	return out
}

// offeredName is the name under which p offers server's entry original,
// whose preferred name is q.
func (p *pool) offeredName(kind, server, original, q string) string {
	if len(p.renamed) == 0 {
		return q
	}
	if name, ok := p.renamed[renameKey{kind, server, original}]; ok {
		return name
	}
	return q
}
