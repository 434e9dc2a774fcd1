package actors

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
