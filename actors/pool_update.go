package actors

import (
	"maps"
	"slices"
	"strings"
)

// nextPool returns the pool for servers and the events that tell
// subscribers how it differs from prev (see diffPools). It is what
// buildPool followed by diffPools would return, at a cost proportional
// to what changed rather than to the pool: when only some servers'
// views (or toggles) changed since prev and no name is contested, prev's
// indexes are copied and only those servers' entries replaced. Otherwise
// — the first pool, new built-ins, a collision now or before — it
// builds the pool whole.
//
// Called by the registry goroutine only: it caches offers on the views.
func nextPool(servers []poolServer, builtins []BuiltinTool, maxDescription int, prev *pool) (*pool, []Event) {
	if p, evs, ok := updatePool(servers, builtins, maxDescription, prev); ok {
		return p, evs
	}
	p := buildPool(servers, builtins, maxDescription, prev)
	if prev == nil {
		prev = emptyPool
	}
	return p, diffPools(prev, p)
}

// contribution is what one server puts in the pool, under its preferred
// names (the update path runs only when no name is contested).
type contribution struct {
	view      *serverView
	offer     *offer // nil unless the server offers its lists
	off       bool
	hidden    []poolEntry // tools routed while not offered, keyed by QualifiedName
	offRoutes []string    // names refused with ErrServerOff
}

func contributionOf(s poolServer, v *serverView, prev pooledView, maxDescription int) contribution {
	c := contribution{view: v, off: s.off}
	if v == nil {
		return c
	}
	if s.off {
		for _, t := range v.lists.tools {
			c.offRoutes = append(c.offRoutes, QualifiedName(s.name, t.Name))
		}
		for _, pr := range v.lists.prompts {
			c.offRoutes = append(c.offRoutes, QualifiedName(s.name, pr.Name))
		}
		return c
	}
	if v.routesHiddenTools() {
		trusted := v.cfg.Trust == "trusted"
		for _, t := range v.lists.tools {
			if v.cfg.Tools.allowed(t.Name) && !v.withheld(t.Name) {
				c.hidden = append(c.hidden, poolEntry{h: s.h, name: t.Name, replayable: trusted && readOnlyAndIdempotent(t)})
			}
		}
	}
	if v.offersTools() {
		c.offer = offerOf(s.name, v, prev, maxDescription)
	}
	return c
}

// updatePool is nextPool's incremental path; ok is false when the pool
// must be built whole.
func updatePool(servers []poolServer, builtins []BuiltinTool, maxDescription int, prev *pool) (p *pool, evs []Event, ok bool) {
	if prev == nil || prev.parts == nil || prev.contested || len(prev.collisions) > 0 || len(prev.renamed) > 0 ||
		prev.maxDescription != maxDescription || !sameSlice(prev.builtinsFrom, builtins) {
		return nil, nil, false
	}
	// Which servers changed: added, removed, toggled, renamed, or with a
	// new view.
	type change struct {
		name     string
		old, cur *poolServer
	}
	var changes []change
	kept := 0 // servers of prev still configured
	for i := range servers {
		s := &servers[i]
		old, had := prev.parts[s.h]
		if !had {
			changes = append(changes, change{name: s.name, cur: s})
			continue
		}
		kept++
		if old.name != s.name || old.off != s.off || prev.views[s.h].view != s.h.view.Load() {
			was := old
			changes = append(changes, change{name: s.name, old: &was, cur: s})
		}
	}
	if kept < len(prev.parts) { // some were removed
		present := make(map[*serverHandle]bool, len(servers))
		for _, s := range servers {
			present[s.h] = true
		}
		for h, old := range prev.parts {
			if !present[h] {
				was := old
				changes = append(changes, change{name: old.name, old: &was})
			}
		}
	}
	if len(changes) == 0 {
		return prev, nil, true
	}
	if 2*len(changes) > len(servers) {
		return nil, nil, false // most of it: building it whole is cheaper
	}
	slices.SortFunc(changes, func(a, b change) int { return strings.Compare(a.name, b.name) })
	for i := 1; i < len(changes); i++ {
		if changes[i].name == changes[i-1].name {
			return nil, nil, false // a server replaced under its name: one diff, built whole
		}
	}

	p = &pool{
		builtins: prev.builtins, builtinByName: prev.builtinByName,
		toolsByName: maps.Clone(prev.toolsByName), promptsByName: maps.Clone(prev.promptsByName),
		hiddenTools: maps.Clone(prev.hiddenTools), off: maps.Clone(prev.off), offRoutes: maps.Clone(prev.offRoutes),
		renamed: map[renameKey]string{}, offered: maps.Clone(prev.offered),
		views: maps.Clone(prev.views), parts: maps.Clone(prev.parts),
		builtinsFrom: builtins, maxDescription: maxDescription,
	}
	// Take the changed servers' old entries out.
	olds := make([]contribution, len(changes))
	changed := make(map[string]bool, 2*len(changes))
	for i, c := range changes {
		if c.old == nil {
			continue
		}
		changed[c.old.name] = true
		h := c.old.h
		olds[i] = contributionOf(*c.old, prev.views[h].view, prev.views[h], maxDescription) // its offer is the one prev used
		oc := olds[i]
		delete(p.views, h)
		delete(p.parts, h)
		delete(p.off, c.old.name)
		delete(p.offered, c.old.name)
		for _, q := range oc.offRoutes {
			if p.offRoutes[q] == c.old.name {
				delete(p.offRoutes, q)
			}
		}
		for _, e := range oc.hidden {
			if q := QualifiedName(c.old.name, e.name); p.hiddenTools[q].h == h {
				delete(p.hiddenTools, q)
			}
		}
		if oc.offer != nil {
			for _, t := range oc.offer.tools {
				if p.toolsByName[t.tool.Name].h == h {
					delete(p.toolsByName, t.tool.Name)
				}
			}
			for _, pr := range oc.offer.prompts {
				if p.promptsByName[pr.Name].h == h {
					delete(p.promptsByName, pr.Name)
				}
			}
		}
	}
	// Put their new entries in; a contested name sends the pool to be
	// built whole, where the namer settles it.
	news := make([]contribution, len(changes))
	var addTools []*Tool
	var addPrompts []Prompt
	var addResources []Resource
	var addTemplates []ResourceTemplate
	for i, c := range changes {
		if c.cur == nil {
			continue
		}
		s := *c.cur
		changed[s.name] = true
		v := s.h.view.Load()
		nc := contributionOf(s, v, prev.views[s.h], maxDescription)
		news[i] = nc
		p.parts[s.h] = s
		if v == nil {
			continue
		}
		p.views[s.h] = pooledView{view: v, offer: nc.offer}
		if s.off {
			p.off[s.name] = true
			for _, q := range nc.offRoutes {
				if _, taken := p.offRoutes[q]; taken {
					return nil, nil, false
				}
				p.offRoutes[q] = s.name
			}
			continue
		}
		for _, e := range nc.hidden {
			q := QualifiedName(s.name, e.name)
			if _, taken := p.hiddenTools[q]; taken {
				return nil, nil, false
			}
			p.hiddenTools[q] = e
		}
		o := nc.offer
		if o == nil {
			continue
		}
		for i := range o.tools {
			t := &o.tools[i]
			q := t.tool.Name
			if _, taken := p.toolsByName[q]; taken {
				return nil, nil, false
			}
			if _, taken := p.builtinByName[q]; taken {
				return nil, nil, false
			}
			p.toolsByName[q] = poolEntry{h: s.h, name: t.tool.Definition.Name, replayable: t.replayable}
			addTools = append(addTools, &t.tool)
		}
		p.offered[s.name] = len(o.tools)
		for _, pr := range o.prompts {
			if _, taken := p.promptsByName[pr.Name]; taken {
				return nil, nil, false
			}
			p.promptsByName[pr.Name] = poolEntry{h: s.h, name: pr.Prompt.Name}
			addPrompts = append(addPrompts, pr)
		}
		addResources = append(addResources, o.resources...)
		addTemplates = append(addTemplates, o.templates...)
	}
	// The lists: prev's without the changed servers' entries, merged with
	// their new ones (tools and prompts by name; resources and templates
	// grouped by server, servers in name order).
	slices.SortFunc(addTools, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(addPrompts, func(a, b Prompt) int { return strings.Compare(a.Name, b.Name) })
	p.tools = mergeSorted(prev.tools, addTools, func(t *Tool) bool { return changed[t.Server] }, func(t *Tool) string { return t.Name })
	p.prompts = mergeSorted(prev.prompts, addPrompts, func(t Prompt) bool { return changed[t.Server] }, func(t Prompt) string { return t.Name })
	p.resources = mergeSorted(prev.resources, addResources, func(r Resource) bool { return changed[r.Server] }, func(r Resource) string { return r.Server })
	p.templates = mergeSorted(prev.templates, addTemplates, func(r ResourceTemplate) bool { return changed[r.Server] }, func(r ResourceTemplate) string { return r.Server })

	// The events: the changed servers' diffs, in name order.
	for i, c := range changes {
		var oldItems, curItems [3][]poolItem
		if c.old != nil {
			oldItems = olds[i].items(c.old.name)
		}
		if c.cur != nil {
			curItems = news[i].items(c.cur.name)
		}
		same := map[string]bool{c.name: olds[i].offer != nil && olds[i].offer == news[i].offer}
		if d := diffItems(oldItems[0], curItems[0], same)[c.name]; d != nil {
			evs = append(evs, Event{Type: EventToolsChanged, Server: c.name, Diff: d, Tools: len(p.tools)})
		}
		if d := diffItems(oldItems[1], curItems[1], same)[c.name]; d != nil {
			evs = append(evs, Event{Type: EventPromptsChanged, Server: c.name, Diff: d})
		}
		if d := diffItems(oldItems[2], curItems[2], same)[c.name]; d != nil {
			evs = append(evs, Event{Type: EventResourcesChanged, Server: c.name, Diff: d})
		}
	}
	return p, evs, true
}

// items lists a contribution's offered tools, prompts, and resources with
// templates, as diffItems compares them.
func (c contribution) items(server string) (out [3][]poolItem) {
	if c.offer == nil || c.off {
		return out
	}
	for i := range c.offer.tools {
		t := &c.offer.tools[i]
		out[0] = append(out[0], poolItem{server, t.tool.Name, &t.tool.Definition})
	}
	for i := range c.offer.prompts {
		pr := &c.offer.prompts[i]
		out[1] = append(out[1], poolItem{server, pr.Name, &pr.Prompt})
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

// mergeSorted returns the elements of old that drop does not reject,
// merged with add, both sorted by key (equal keys: old's first).
func mergeSorted[T any](old, add []T, drop func(T) bool, key func(T) string) []T {
	out := make([]T, 0, len(old)+len(add))
	j := 0
	for _, x := range old {
		if drop(x) {
			continue
		}
		for j < len(add) && key(add[j]) < key(x) {
			out = append(out, add[j])
			j++
		}
		out = append(out, x)
	}
	return append(out, add[j:]...)
}
