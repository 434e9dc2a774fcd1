package mcpvisor

import (
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
func nextPool(servers []poolServer, builtins []BuiltinTool, maxDescription int, prev *pool) (*pool, []eventRecord) {
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
	p, evs, _ := applyChanges(prev, builtinPool(builtins, maxDescription), allChanges(prev, servers), maxDescription, true)
	return p, evs
}

// extendable reports whether entries may be taken out of p and put in
// without a rebase: p was made for the same built-ins and cap, and no
// name in it was renamed or contested.
func (p *pool) extendable(builtins []BuiltinTool, maxDescription int) bool {
	return p.built && !p.contested && len(p.collisions) == 0 && len(p.renamed) == 0 &&
		p.maxDescription == maxDescription && sameSlice(p.builtinsFrom, builtins)
}

// builtinPool is the base of a rebase: the built-ins and nothing else.
func builtinPool(builtins []BuiltinTool, maxDescription int) *pool {
	p := &pool{
		builtinByName: make(map[string]*BuiltinTool, len(builtins)),
		renamed:       map[renameKey]string{}, builtinsFrom: builtins, maxDescription: maxDescription, built: true,
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
		old, had := prev.parts.Get(s.h)
		if !had {
			changes = append(changes, poolChange{name: s.name, cur: s})
			continue
		}
		kept++
		if old.name != s.name || old.off != s.off || prev.viewOf(s.h).view != s.h.view.Load() {
			was := old // only the changed servers' copies escape
			changes = append(changes, poolChange{name: s.name, old: &was, cur: s})
		}
	}
	if kept < prev.parts.Len() { // some were removed
		present := make(map[*serverHandle]bool, len(servers))
		for _, s := range servers {
			present[s.h] = true
		}
		for h, old := range prev.parts.All() {
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
	changes := make([]poolChange, 0, len(servers)+prev.parts.Len())
	at := make(map[string]int, cap(changes)) // name → index in changes
	for i := range servers {
		s := &servers[i]
		at[s.name] = len(changes)
		changes = append(changes, poolChange{name: s.name, cur: s})
	}
	olds := make([]poolServer, 0, prev.parts.Len()) // never grown: the changes point into it
	for _, old := range prev.parts.All() {
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
