package mcpvisor

// The pool as a whole build and a whole diff make it: the specification
// of nextPool (TestNextPoolMatchesAWholeBuild), kept only in the tests.

import (
	"maps"
	"slices"
	"strings"
)

// buildPool is the reference nextPool is checked against: it assembles
// the pool whole (as the registry did before issue 17 made nextPool the
// one way), from the servers from the servers (in any order) and the
// host's built-ins. Names are handed out by a namer, so collisions
// resolve the same way whatever order the servers became ready in: a
// built-in keeps its name, then the server first by name, then the tool
// first by its own name.
// prev, the pool this one replaces (nil for the first), supplies the names
// of the entries of servers not offering them, and the offers of views
// that did not change.
func buildPool(servers []poolServer, builtins []BuiltinTool, maxDescription int, prev *pool) *pool {
	if prev == nil {
		prev = emptyPool
	}
	slices.SortFunc(servers, func(a, b poolServer) int { return strings.Compare(a.name, b.name) })
	nTools, nPrompts := len(prev.tools), len(prev.prompts)
	p := &pool{
		builtinByName: map[string]*BuiltinTool{}, renamed: map[renameKey]string{},
		tools: make([]*Tool, 0, nTools), prompts: make([]Prompt, 0, nPrompts),
		builtinsFrom: builtins, maxDescription: maxDescription, built: true,
	}
	// known is the name of an entry of a server not offering it now, which
	// stays remembered for the next pool.
	known := func(kind, server, original string) string {
		name := prev.knownName(kind, server, original)
		if name != QualifiedName(server, original) {
			p.renamed[renameKey{kind, server, original}] = name
		}
		return name
	}
	tools, prompts := newNamer("tool", nTools), newNamer("prompt", nPrompts)
	for i := range builtins {
		b := &builtins[i]
		p.builtinByName[b.Definition.Name] = b
		tools.holders[b.Definition.Name] = holder{}
		p.builtins = append(p.builtins, Tool{Name: b.Definition.Name, Builtin: true, Definition: b.Definition})
	}
	toolsSorted := true // p.tools is in name order so far
	for _, s := range servers {
		p.parts.Set(s.h, s)
		v := s.h.view.Load()
		if v == nil {
			continue
		}
		p.views.Set(s.h, pooledView{view: v})
		if s.off {
			p.off.Set(s.name, true)
			for _, t := range v.lists.tools {
				p.routeOff(known("tool", s.name, t.Name), s.name)
			}
			for _, pr := range v.lists.prompts {
				p.routeOff(known("prompt", s.name, pr.Name), s.name)
			}
			continue
		}
		if v.routesHiddenTools() {
			trusted := v.cfg.Trust == "trusted"
			for _, t := range v.lists.tools {
				if v.cfg.Tools.allowed(t.Name) && !v.withheld(t.Name) {
					q := known("tool", s.name, t.Name)
					if p.hiddenTools.Has(q) {
						p.contested = true
					}
					p.hiddenTools.Set(q, poolEntry{h: s.h, name: t.Name, replayable: trusted && readOnlyAndIdempotent(t)})
				}
			}
		}
		if !v.offersTools() {
			continue
		}
		o := offerOf(s.name, v, prev.viewOf(s.h), maxDescription)
		p.views.Set(s.h, pooledView{view: v, offer: o})
		for i := range o.tools {
			t := &o.tools[i]
			q := tools.claimPreferred(s.name, t.tool.Definition.Name, t.tool.Name)
			p.toolsByName.Set(q, poolEntry{h: s.h, name: t.tool.Definition.Name, replayable: t.replayable})
			if n := len(p.tools); toolsSorted && n > 0 && p.tools[n-1].Name > q {
				toolsSorted = false
			}
			tool := &t.tool
			if q != tool.Name { // renamed: a copy under its new name
				renamed := *tool
				renamed.Name = q
				tool = &renamed
			}
			p.tools = append(p.tools, tool)
		}
		offered, _ := p.offered.Get(s.name)
		p.offered.Set(s.name, offered+len(o.tools))
		for _, pr := range o.prompts {
			q := prompts.claimPreferred(s.name, pr.Prompt.Name, pr.Name)
			p.promptsByName.Set(q, poolEntry{h: s.h, name: pr.Prompt.Name})
			pr.Name = q
			p.prompts = append(p.prompts, pr)
		}
		p.resources = append(p.resources, o.resources...)
		p.templates = append(p.templates, o.templates...)
	}
	slices.SortFunc(p.builtins, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	if !toolsSorted {
		slices.SortFunc(p.tools, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	}
	slices.SortFunc(p.prompts, func(a, b Prompt) int { return strings.Compare(a.Name, b.Name) })
	p.collisions = append(tools.collisions, prompts.collisions...)
	for _, c := range p.collisions {
		p.renamed[renameKey{c.Kind, c.Server, c.Original}] = c.Renamed
	}
	return p
}

// routeOff routes name to the toggled-off server.
func (p *pool) routeOff(name, server string) {
	if p.offRoutes.Has(name) {
		p.contested = true
	}
	p.offRoutes.Set(name, server)
}

// diffPools returns the events that tell subscribers how the pool changed
// from old to p: per server and kind, one *_changed event with its diff
// (servers in name order; tools, then prompts, then resources), then one
// collision event per rename that old did not make.
func diffPools(old, p *pool) []eventRecord {
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
	for h, pv := range p.views.All() {
		if pv.offer != nil && old.viewOf(h).offer == pv.offer {
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
	var evs []eventRecord
	for _, s := range slices.Sorted(maps.Keys(servers)) {
		if d := tools[s]; d != nil {
			evs = append(evs, eventRecord{Type: EventToolsChanged, Server: s, Diff: d, Tools: len(p.tools)})
		}
		if d := prompts[s]; d != nil {
			evs = append(evs, eventRecord{Type: EventPromptsChanged, Server: s, Diff: d})
		}
		if d := resources[s]; d != nil {
			evs = append(evs, eventRecord{Type: EventResourcesChanged, Server: s, Diff: d})
		}
	}
	seen := map[Collision]bool{}
	for _, c := range old.collisions {
		seen[c] = true
	}
	for _, c := range p.collisions {
		if !seen[c] {
			evs = append(evs, eventRecord{Type: EventCollision, Server: c.Server, Collision: &c})
		}
	}
	return evs
}
