package mcpvisor

import (
	"slices"
	"sort"
	"strings"
)

// applyChanges takes the changed servers' entries out of a copy of base
// and puts their new ones in. base is prev (ok is false when a new entry
// takes a held name: a rebase is due), or, in a rebase, a fresh pool of
// the built-ins alone (filled in place), where a held name is renamed and
// a contested route goes to the later server, as claiming in name order
// settles them.
func applyChanges(prev, base *pool, changes []poolChange, maxDescription int, rebase bool) (p *pool, evs []eventRecord, ok bool) {
	p = base
	if !rebase {
		// The indexes are persistent maps: the copy shares base's, and
		// the changes below copy only the paths they touch.
		p = &pool{
			builtins: base.builtins, builtinByName: base.builtinByName,
			toolsByName: base.toolsByName, promptsByName: base.promptsByName,
			hiddenTools: base.hiddenTools, off: base.off, offRoutes: base.offRoutes,
			renamed: map[renameKey]string{}, offered: base.offered,
			views: base.views, parts: base.parts,
			builtinsFrom: base.builtinsFrom, maxDescription: maxDescription, built: true,
		}
	}
	p.editIndexes()
	defer p.freezeIndexes()
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
		tools, prompts = newNamer("tool", prev.toolsByName.Len()+len(p.builtinByName)), newNamer("prompt", prev.promptsByName.Len())
		for name := range p.builtinByName {
			tools.holders[name] = holder{}
		}
	}
	claim := func(n *namer, held *pmap[string, poolEntry], server, original, q string) (string, bool) {
		if rebase {
			return n.claimPreferred(server, original, q), true
		}
		taken := held.Has(q)
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
		p.parts.Set(s.h, s)
		if v == nil {
			continue
		}
		p.views.Set(s.h, pooledView{view: v, offer: nc.offer})
		if s.off {
			p.off.Set(s.name, true)
			for _, r := range nc.offRoutes {
				if p.offRoutes.Has(r.name) {
					if !rebase {
						return nil, nil, false
					}
					p.contested = true
				}
				p.offRoutes.Set(r.name, s.name)
				p.keepName(prev, r.kind, s.name, r.original)
			}
			continue
		}
		for _, e := range nc.hidden {
			if p.hiddenTools.Has(e.name) {
				if !rebase {
					return nil, nil, false
				}
				p.contested = true
			}
			p.hiddenTools.Set(e.name, e.entry)
			p.keepName(prev, "tool", s.name, e.entry.name)
		}
		o := nc.offer
		if o == nil {
			continue
		}
		for i := range o.tools {
			t := &o.tools[i]
			q, ok := claim(tools, &p.toolsByName, s.name, t.tool.Definition.Name, t.tool.Name)
			if !ok {
				return nil, nil, false
			}
			p.toolsByName.Set(q, poolEntry{h: s.h, name: t.tool.Definition.Name, replayable: t.replayable})
			tool := &t.tool
			if q != tool.Name { // renamed: a copy under its new name
				renamed := *tool
				renamed.Name = q
				tool = &renamed
			}
			addTools = append(addTools, tool)
		}
		p.offered.Set(s.name, len(o.tools))
		for _, pr := range o.prompts {
			q, ok := claim(prompts, &p.promptsByName, s.name, pr.Prompt.Name, pr.Name)
			if !ok {
				return nil, nil, false
			}
			p.promptsByName.Set(q, poolEntry{h: s.h, name: pr.Prompt.Name})
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
	// Tool and prompt names are unique in a list: the changed servers'
	// old entries are found by name, not by testing every entry.
	var dropTools, dropPrompts []string
	for i := range olds {
		if o := olds[i].offer; !rebase && o != nil && !olds[i].off {
			for j := range o.tools {
				dropTools = append(dropTools, o.tools[j].tool.Name)
			}
			for j := range o.prompts {
				dropPrompts = append(dropPrompts, o.prompts[j].Name)
			}
		}
	}
	p.tools = spliceSorted(baseTools, dropTools, addTools, func(t *Tool) string { return t.Name })
	p.prompts = spliceSorted(basePrompts, dropPrompts, addPrompts, func(t Prompt) string { return t.Name })
	p.resources = mergeSorted(baseResources, addResources, func(r Resource) bool { return changed[r.Server] }, func(r Resource) string { return r.Server })
	p.templates = mergeSorted(baseTemplates, addTemplates, func(r ResourceTemplate) bool { return changed[r.Server] }, func(r ResourceTemplate) string { return r.Server })

	return p, changeEvents(prev, p, changes, olds, news), true
}

// takeOut removes from p the entries old (with contribution oc) put in
// the pool it was copied from.
func (p *pool) takeOut(old poolServer, oc contribution) {
	h := old.h
	p.views.Delete(h)
	p.parts.Delete(h)
	p.off.Delete(old.name)
	p.offered.Delete(old.name)
	for _, r := range oc.offRoutes {
		if server, _ := p.offRoutes.Get(r.name); server == old.name {
			p.offRoutes.Delete(r.name)
		}
	}
	for _, e := range oc.hidden {
		if cur, _ := p.hiddenTools.Get(e.name); cur.h == h {
			p.hiddenTools.Delete(e.name)
		}
	}
	if oc.offer != nil {
		for _, t := range oc.offer.tools {
			if cur, _ := p.toolsByName.Get(t.tool.Name); cur.h == h {
				p.toolsByName.Delete(t.tool.Name)
			}
		}
		for _, pr := range oc.offer.prompts {
			if cur, _ := p.promptsByName.Get(pr.Name); cur.h == h {
				p.promptsByName.Delete(pr.Name)
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

// spliceSorted returns old (sorted by key, each key once) without the
// elements whose keys are in drop, merged with add (sorted by key; equal
// keys: old's first). The runs of old between the changes are copied
// whole: it costs a copy of old and a binary search per change, where
// mergeSorted tests every element. A key of drop not in old is ignored.
func spliceSorted[T any](old []T, drop []string, add []T, key func(T) string) []T {
	slices.Sort(drop)
	out := make([]T, 0, max(len(old)-len(drop), 0)+len(add))
	i, d, a := 0, 0, 0 // the next element of old, drop and add
	for d < len(drop) || a < len(add) {
		di, ai := len(old)+1, len(old)+1 // where the next drop and insert cut old
		if d < len(drop) {
			di = i + sort.Search(len(old)-i, func(j int) bool { return key(old[i+j]) >= drop[d] })
			if di == len(old) || key(old[di]) != drop[d] {
				d++ // not in old
				continue
			}
		}
		if a < len(add) {
			k := key(add[a])
			ai = i + sort.Search(len(old)-i, func(j int) bool { return key(old[i+j]) > k })
		}
		if ai <= di { // add[a] goes before old[ai]
			out = append(append(out, old[i:ai]...), add[a])
			i = ai
			a++
		} else { // old[di] goes
			out = append(out, old[i:di]...)
			i = di + 1
			d++
		}
	}
	return append(out, old[i:]...)
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

// editIndexes starts a build of p's indexes (see pmap.edit): the nodes
// this build makes are changed in place until freezeIndexes.
func (p *pool) editIndexes() {
	p.toolsByName.edit()
	p.promptsByName.edit()
	p.hiddenTools.edit()
	p.off.edit()
	p.offRoutes.edit()
	p.offered.edit()
	p.views.edit()
	p.parts.edit()
}

// freezeIndexes ends the build editIndexes started: p's indexes are
// snapshots again, which the next pool's build copies before changing.
func (p *pool) freezeIndexes() {
	p.toolsByName.freeze()
	p.promptsByName.freeze()
	p.hiddenTools.freeze()
	p.off.freeze()
	p.offRoutes.freeze()
	p.offered.freeze()
	p.views.freeze()
	p.parts.freeze()
}
