package actors

import (
	"maps"
	"slices"
	"strings"
)

// nextPool returns the pool for servers (in any order) and the host's
// built-ins, and the events that tell subscribers how it differs from
// prev (nil for the first pool): per server in name order, its
// tools_changed, prompts_changed and resources_changed with their diffs,
// then one collision event per rename prev did not make.
//
// It is the one way a pool is made: the entries of the servers that
// changed since prev are taken out of a copy of prev and their new ones
// put in, at a cost proportional to what changed. Names are claimed in a
// fixed order, so collisions resolve the same way whatever order the
// servers became ready in: a built-in keeps its name, then the server
// first by name, then the tool first by its own name. Taking entries out
// of prev can honour that order only when prev renamed nothing and the
// new entries take no held name; otherwise (and for the first pool, new
// built-ins or a new description cap, or when most servers changed) the
// same steps start from a pool of the built-ins alone with every server
// counted as changed: a rebase. prev still supplies the names of the
// entries of servers not offering them, and the offers of views that did
// not change.
//
// Called by the registry goroutine only.
func nextPool(servers []poolServer, builtins []BuiltinTool, maxDescription int, prev *pool) (*pool, []Event) {
	if prev == nil {
		prev = emptyPool
	}
	if prev.extendable(builtins, maxDescription) {
		changes, ok := changesSince(prev, servers)
		if ok && len(changes) == 0 {
			return prev, nil
		}
		if ok {
			if p, evs, ok := applyChanges(prev, prev, changes, maxDescription, false); ok {
				return p, evs
			}
		}
	}
	p, evs, _ := applyChanges(prev, builtinPool(builtins, maxDescription, prev), allChanges(prev, servers), maxDescription, true)
	return p, evs
}

// extendable reports whether entries may be taken out of p and put in
// without a rebase: p was made for the same built-ins and cap, and no
// name in it was renamed or contested.
func (p *pool) extendable(builtins []BuiltinTool, maxDescription int) bool {
	return p.parts != nil && !p.contested && len(p.collisions) == 0 && len(p.renamed) == 0 &&
		p.maxDescription == maxDescription && sameSlice(p.builtinsFrom, builtins)
}

// builtinPool is the base of a rebase: the built-ins and nothing else,
// with room for as much as like (the pool it replaces) held.
func builtinPool(builtins []BuiltinTool, maxDescription int, like *pool) *pool {
	p := &pool{
		builtinByName: make(map[string]*BuiltinTool, len(builtins)),
		toolsByName:   make(map[string]poolEntry, len(like.toolsByName)), promptsByName: make(map[string]poolEntry, len(like.promptsByName)),
		hiddenTools: map[string]poolEntry{}, off: map[string]bool{}, offRoutes: map[string]string{},
		views: make(map[*serverHandle]pooledView, len(like.views)), offered: make(map[string]int, len(like.offered)), renamed: map[renameKey]string{},
		parts: make(map[*serverHandle]poolServer, len(like.parts)), builtinsFrom: builtins, maxDescription: maxDescription,
	}
	for i := range builtins {
		b := &builtins[i]
		p.builtinByName[b.Definition.Name] = b
		p.builtins = append(p.builtins, Tool{Name: b.Definition.Name, Builtin: true, Definition: b.Definition})
	}
	slices.SortFunc(p.builtins, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return p
}

// poolChange is one server whose part of the pool changed: old is what
// the previous pool had of it (nil: added), cur what it is now (nil:
// removed).
type poolChange struct {
	name     string
	old, cur *poolServer
}

// changesSince lists the servers added, removed, toggled, renamed, or
// with a new view since prev, in name order; ok is false when a rebase is
// due instead (most servers changed, or one was replaced under its name).
func changesSince(prev *pool, servers []poolServer) (changes []poolChange, ok bool) {
	kept := 0 // servers of prev still configured
	for i := range servers {
		s := &servers[i]
		old, had := prev.parts[s.h]
		if !had {
			changes = append(changes, poolChange{name: s.name, cur: s})
			continue
		}
		kept++
		if old.name != s.name || old.off != s.off || prev.views[s.h].view != s.h.view.Load() {
			was := old // only the changed servers' copies escape
			changes = append(changes, poolChange{name: s.name, old: &was, cur: s})
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
				changes = append(changes, poolChange{name: old.name, old: &was})
			}
		}
	}
	if 2*len(changes) > len(servers) {
		return nil, false // most of it: a rebase is cheaper
	}
	slices.SortFunc(changes, func(a, b poolChange) int { return strings.Compare(a.name, b.name) })
	for i := 1; i < len(changes); i++ {
		if changes[i].name == changes[i-1].name {
			return nil, false // a server replaced under its name: one diff, in a rebase
		}
	}
	return changes, true
}

// allChanges counts every server of prev and of servers as changed, one
// change per name, in name order: a rebase.
func allChanges(prev *pool, servers []poolServer) []poolChange {
	changes := make([]poolChange, 0, len(servers)+len(prev.parts))
	at := make(map[string]int, cap(changes)) // name → index in changes
	for i := range servers {
		s := &servers[i]
		at[s.name] = len(changes)
		changes = append(changes, poolChange{name: s.name, cur: s})
	}
	olds := make([]poolServer, 0, len(prev.parts)) // never grown: the changes point into it
	for _, old := range prev.parts {
		olds = append(olds, old)
		was := &olds[len(olds)-1]
		if i, ok := at[old.name]; ok {
			changes[i].old = was
		} else {
			changes = append(changes, poolChange{name: old.name, old: was})
		}
	}
	slices.SortFunc(changes, func(a, b poolChange) int { return strings.Compare(a.name, b.name) })
	return changes
}

// contribution is what one server puts in the pool: its view, its offer
// (nil unless it offers its lists), and the names it routes without
// offering them.
type contribution struct {
	view      *serverView
	offer     *offer
	off       bool
	hidden    []hiddenTool // tools routed while not offered
	offRoutes []offRoute   // names refused with ErrServerOff
}

// hiddenTool is a tool routed while not offered, under the name it was
// last offered under (entry.name is its own).
type hiddenTool struct {
	name  string
	entry poolEntry
}

// offRoute is a tool or prompt of a toggled-off server, under the name
// it was last offered under.
type offRoute struct {
	kind, original, name string
}

// contributionOf is what s, with view v, puts in the pool; prev is the
// pool before (its offer for the server, and the names of the entries it
// routes without offering).
func contributionOf(s poolServer, v *serverView, prev *pool, maxDescription int) contribution {
	c := routesOf(s, v, prev)
	if v != nil && !s.off && v.offersTools() {
		c.offer = offerOf(s.name, v, prev.views[s.h], maxDescription)
	}
	return c
}

// usedBy is the contribution old made to prev: the offer prev used.
func usedBy(old poolServer, prev *pool) contribution {
	pv := prev.views[old.h]
	c := routesOf(old, pv.view, prev)
	c.offer = pv.offer
	return c
}

// routesOf is what s, with view v, routes without offering it, under
// the names prev gave.
func routesOf(s poolServer, v *serverView, prev *pool) contribution {
	c := contribution{view: v, off: s.off}
	if v == nil {
		return c
	}
	if s.off {
		for _, t := range v.lists.tools {
			c.offRoutes = append(c.offRoutes, offRoute{"tool", t.Name, prev.knownName("tool", s.name, t.Name)})
		}
		for _, pr := range v.lists.prompts {
			c.offRoutes = append(c.offRoutes, offRoute{"prompt", pr.Name, prev.knownName("prompt", s.name, pr.Name)})
		}
		return c
	}
	if v.routesHiddenTools() {
		trusted := v.cfg.Trust == "trusted"
		for _, t := range v.lists.tools {
			if v.cfg.Tools.allowed(t.Name) && !v.withheld(t.Name) {
				c.hidden = append(c.hidden, hiddenTool{prev.knownName("tool", s.name, t.Name),
					poolEntry{h: s.h, name: t.Name, replayable: trusted && readOnlyAndIdempotent(t)}})
			}
		}
	}
	return c
}

// applyChanges takes the changed servers' entries out of a copy of base
// and puts their new ones in. base is prev (ok is false when a new entry
// takes a held name: a rebase is due), or, in a rebase, a fresh pool of
// the built-ins alone (filled in place), where a held name is renamed and
// a contested route goes to the later server, as claiming in name order
// settles them.
func applyChanges(prev, base *pool, changes []poolChange, maxDescription int, rebase bool) (p *pool, evs []Event, ok bool) {
	p = base
	if !rebase {
		p = &pool{
			builtins: base.builtins, builtinByName: base.builtinByName,
			toolsByName: maps.Clone(base.toolsByName), promptsByName: maps.Clone(base.promptsByName),
			hiddenTools: maps.Clone(base.hiddenTools), off: maps.Clone(base.off), offRoutes: maps.Clone(base.offRoutes),
			renamed: map[renameKey]string{}, offered: maps.Clone(base.offered),
			views: maps.Clone(base.views), parts: maps.Clone(base.parts),
			builtinsFrom: base.builtinsFrom, maxDescription: maxDescription,
		}
	}
	baseTools, basePrompts, baseResources, baseTemplates := base.tools, base.prompts, base.resources, base.templates
	// What the changed servers had: their entries in prev (taken out of
	// the copy, unless this is a rebase, whose base lacks them).
	olds := make([]contribution, len(changes))
	changed := make(map[string]bool, 2*len(changes))
	for i, c := range changes {
		if c.old == nil {
			continue
		}
		olds[i] = usedBy(*c.old, prev)
		if !rebase {
			changed[c.old.name] = true
			p.takeOut(*c.old, olds[i])
		}
	}
	// Their new entries, claimed in name order.
	tools, prompts := newNamer("tool", 0), newNamer("prompt", 0)
	if rebase {
		tools, prompts = newNamer("tool", len(prev.toolsByName)+len(p.builtinByName)), newNamer("prompt", len(prev.promptsByName))
		for name := range p.builtinByName {
			tools.holders[name] = holder{}
		}
	}
	claim := func(n *namer, held map[string]poolEntry, server, original, q string) (string, bool) {
		if rebase {
			return n.claimPreferred(server, original, q), true
		}
		_, taken := held[q]
		if _, builtin := p.builtinByName[q]; taken || (builtin && n == tools) {
			return "", false
		}
		return q, true
	}
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
		nc := contributionOf(s, v, prev, maxDescription)
		news[i] = nc
		p.parts[s.h] = s
		if v == nil {
			continue
		}
		p.views[s.h] = pooledView{view: v, offer: nc.offer}
		if s.off {
			p.off[s.name] = true
			for _, r := range nc.offRoutes {
				if _, taken := p.offRoutes[r.name]; taken {
					if !rebase {
						return nil, nil, false
					}
					p.contested = true
				}
				p.offRoutes[r.name] = s.name
				p.keepName(prev, r.kind, s.name, r.original)
			}
			continue
		}
		for _, e := range nc.hidden {
			if _, taken := p.hiddenTools[e.name]; taken {
				if !rebase {
					return nil, nil, false
				}
				p.contested = true
			}
			p.hiddenTools[e.name] = e.entry
			p.keepName(prev, "tool", s.name, e.entry.name)
		}
		o := nc.offer
		if o == nil {
			continue
		}
		for i := range o.tools {
			t := &o.tools[i]
			q, ok := claim(tools, p.toolsByName, s.name, t.tool.Definition.Name, t.tool.Name)
			if !ok {
				return nil, nil, false
			}
			p.toolsByName[q] = poolEntry{h: s.h, name: t.tool.Definition.Name, replayable: t.replayable}
			tool := &t.tool
			if q != tool.Name { // renamed: a copy under its new name
				renamed := *tool
				renamed.Name = q
				tool = &renamed
			}
			addTools = append(addTools, tool)
		}
		p.offered[s.name] = len(o.tools)
		for _, pr := range o.prompts {
			q, ok := claim(prompts, p.promptsByName, s.name, pr.Prompt.Name, pr.Name)
			if !ok {
				return nil, nil, false
			}
			p.promptsByName[q] = poolEntry{h: s.h, name: pr.Prompt.Name}
			pr.Name = q
			addPrompts = append(addPrompts, pr)
		}
		addResources = append(addResources, o.resources...)
		addTemplates = append(addTemplates, o.templates...)
	}
	p.collisions = append(tools.collisions, prompts.collisions...)
	for _, c := range p.collisions {
		p.renamed[renameKey{c.Kind, c.Server, c.Original}] = c.Renamed
	}

	// The lists: base's without the changed servers' entries, merged with
	// their new ones (tools and prompts by name; resources and templates
	// grouped by server, servers in name order, as the changes are).
	byToolName := func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) }
	if !slices.IsSortedFunc(addTools, byToolName) {
		slices.SortFunc(addTools, byToolName)
	}
	slices.SortFunc(addPrompts, func(a, b Prompt) int { return strings.Compare(a.Name, b.Name) })
	p.tools = mergeSorted(baseTools, addTools, func(t *Tool) bool { return changed[t.Server] }, func(t *Tool) string { return t.Name })
	p.prompts = mergeSorted(basePrompts, addPrompts, func(t Prompt) bool { return changed[t.Server] }, func(t Prompt) string { return t.Name })
	p.resources = mergeSorted(baseResources, addResources, func(r Resource) bool { return changed[r.Server] }, func(r Resource) string { return r.Server })
	p.templates = mergeSorted(baseTemplates, addTemplates, func(r ResourceTemplate) bool { return changed[r.Server] }, func(r ResourceTemplate) string { return r.Server })

	return p, changeEvents(prev, p, changes, olds, news), true
}

// takeOut removes from p the entries old (with contribution oc) put in
// the pool it was copied from.
func (p *pool) takeOut(old poolServer, oc contribution) {
	h := old.h
	delete(p.views, h)
	delete(p.parts, h)
	delete(p.off, old.name)
	delete(p.offered, old.name)
	for _, r := range oc.offRoutes {
		if p.offRoutes[r.name] == old.name {
			delete(p.offRoutes, r.name)
		}
	}
	for _, e := range oc.hidden {
		if p.hiddenTools[e.name].h == h {
			delete(p.hiddenTools, e.name)
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

// keepName keeps, for the next pool, the name prev gave server's entry
// original, which p routes without offering it.
func (p *pool) keepName(prev *pool, kind, server, original string) {
	if len(prev.renamed) == 0 {
		return
	}
	k := renameKey{kind, server, original}
	if name, ok := prev.renamed[k]; ok {
		p.renamed[k] = name
	}
}

// changeEvents are the events of the changed servers, in name order (see
// nextPool): each server's entries in prev against those in p, under
// the names each pool gave them.
func changeEvents(prev, p *pool, changes []poolChange, olds, news []contribution) []Event {
	var evs []Event
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
			evs = append(evs, Event{Type: EventToolsChanged, Server: c.name, Diff: d, Tools: len(p.tools)})
		}
		if d := diffItems(oldItems[1], curItems[1], same)[c.name]; d != nil {
			evs = append(evs, Event{Type: EventPromptsChanged, Server: c.name, Diff: d})
		}
		if d := diffItems(oldItems[2], curItems[2], same)[c.name]; d != nil {
			evs = append(evs, Event{Type: EventResourcesChanged, Server: c.name, Diff: d})
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
			evs = append(evs, Event{Type: EventCollision, Server: c.Server, Collision: &c})
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
