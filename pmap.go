package mcpvisor

import (
	"hash/maphash"
	"iter"
	"math/bits"
	"unsafe"
)

// pmap is a persistent hash map (a hash array mapped trie): a copy of
// the struct is a snapshot that later changes to either copy do not
// touch, and a change copies only the path to its key (O(log₃₂ n) nodes),
// not the whole map. The pool keeps its indexes in pmaps so that the
// registry's next pool, which differs from the last by a few servers'
// entries, costs what changed rather than a clone of every index.
//
// A pmap being built may be edited in place: between edit and freeze,
// the nodes the build made are changed without copying (the build's
// snapshots are never published, so nobody sees them change); nodes of
// earlier snapshots are still copied.
//
// The zero value is an empty map.
//
// Concurrency: a snapshot is immutable and safe for concurrent reads;
// Set and Delete change the pmap value they are called on and must not
// run concurrently with other uses of that value (the registry goroutine
// builds; callers read published pools).
type pmap[K comparable, V any] struct {
	root *pnode[K, V]
	n    int
	// token marks the nodes this build made (nil: not building); they
	// are edited in place.
	token *buildToken
}

// buildToken identifies one build's nodes; only its address matters.
type buildToken struct{ _ byte }

// pmapSeed hashes every pmap's keys: snapshots share nodes, so they must
// agree on where a key lives.
var pmapSeed = maphash.MakeSeed()

// hashKey is k's hash. maphash.Comparable hashes any key but costs
// about 100 ns for a pointer, most of a lookup: strings and server
// handles, the pool's keys, have their own. A handle's address is its
// identity and never changes (heap objects do not move).
func hashKey[K comparable](k K) uint64 {
	switch k := any(k).(type) {
	case string:
		return maphash.String(pmapSeed, k)
	case *serverHandle:
		return mix64(uint64(uintptr(unsafe.Pointer(k))))
	}
	return maphash.Comparable(pmapSeed, k)
}

// mix64 spreads the bits of x over the whole word (the finalizer of
// SplitMix64), so that aligned addresses use every level of the trie.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

const (
	pmapBits = 5
	pmapMask = 1<<pmapBits - 1
)

// pnode is one level of the trie: a slot per set bit of bitmap, in bit
// order. Below the last level (every hash bit used) a node keeps the
// entries whose hashes collide in coll.
type pnode[K comparable, V any] struct {
	bitmap uint32
	slots  []pslot[K, V]
	coll   []pentry[K, V]
	token  *buildToken // the build that made it (see pmap.token)
}

// pslot is a sub-node (node set) or one entry.
type pslot[K comparable, V any] struct {
	node *pnode[K, V]
	e    pentry[K, V]
}

type pentry[K comparable, V any] struct {
	hash uint64
	key  K
	val  V
}

// Len returns the number of entries.
func (m pmap[K, V]) Len() int { return m.n }

// Get returns the value for k.
func (m pmap[K, V]) Get(k K) (v V, ok bool) {
	h := hashKey(k)
	n := m.root
	for shift := uint(0); n != nil; shift += pmapBits {
		if shift >= 64 {
			for _, e := range n.coll {
				if e.key == k {
					return e.val, true
				}
			}
			return v, false
		}
		bit := uint32(1) << ((h >> shift) & pmapMask)
		if n.bitmap&bit == 0 {
			return v, false
		}
		s := &n.slots[bits.OnesCount32(n.bitmap&(bit-1))]
		if s.node != nil {
			n = s.node
			continue
		}
		if s.e.hash == h && s.e.key == k {
			return s.e.val, true
		}
		return v, false
	}
	return v, false
}

// Has reports whether k is in the map.
func (m pmap[K, V]) Has(k K) bool {
	_, ok := m.Get(k)
	return ok
}

// edit starts a build on m: until freeze, Set and Delete change the
// nodes they made in place.
func (m *pmap[K, V]) edit() { m.token = new(buildToken) }

// freeze ends the build: m is a snapshot again.
func (m *pmap[K, V]) freeze() { m.token = nil }

// Set maps k to v.
func (m *pmap[K, V]) Set(k K, v V) {
	e := pentry[K, V]{hash: hashKey(k), key: k, val: v}
	var added bool
	m.root, added = m.set(m.root, 0, e)
	if added {
		m.n++
	}
}

// Delete removes k, if present.
func (m *pmap[K, V]) Delete(k K) {
	if m.root == nil {
		return
	}
	var removed bool
	m.root, removed = m.del(m.root, 0, hashKey(k), k)
	if removed {
		m.n--
	}
}

// own returns n itself when this build made it, else a copy this build
// owns (with room for one more slot).
func (m *pmap[K, V]) own(n *pnode[K, V]) *pnode[K, V] {
	if m.token != nil && n.token == m.token {
		return n
	}
	c := &pnode[K, V]{bitmap: n.bitmap, token: m.token}
	if n.slots != nil {
		c.slots = make([]pslot[K, V], len(n.slots), len(n.slots)+1)
		copy(c.slots, n.slots)
	}
	if n.coll != nil {
		c.coll = append(make([]pentry[K, V], 0, len(n.coll)+1), n.coll...)
	}
	return c
}

func (m *pmap[K, V]) set(n *pnode[K, V], shift uint, e pentry[K, V]) (*pnode[K, V], bool) {
	if n == nil {
		n = &pnode[K, V]{token: m.token}
	} else {
		n = m.own(n)
	}
	if shift >= 64 {
		for i := range n.coll {
			if n.coll[i].key == e.key {
				n.coll[i] = e
				return n, false
			}
		}
		n.coll = append(n.coll, e)
		return n, true
	}
	bit := uint32(1) << ((e.hash >> shift) & pmapMask)
	i := bits.OnesCount32(n.bitmap & (bit - 1))
	if n.bitmap&bit == 0 {
		n.bitmap |= bit
		n.slots = append(n.slots, pslot[K, V]{})
		copy(n.slots[i+1:], n.slots[i:])
		n.slots[i] = pslot[K, V]{e: e}
		return n, true
	}
	s := &n.slots[i]
	switch {
	case s.node != nil:
		var added bool
		s.node, added = m.set(s.node, shift+pmapBits, e)
		return n, added
	case s.e.hash == e.hash && s.e.key == e.key:
		s.e = e
		return n, false
	default: // another key here: both go one level down
		child, _ := m.set(nil, shift+pmapBits, s.e)
		child, _ = m.set(child, shift+pmapBits, e)
		*s = pslot[K, V]{node: child}
		return n, true
	}
}

func (m *pmap[K, V]) del(n *pnode[K, V], shift uint, h uint64, k K) (*pnode[K, V], bool) {
	if shift >= 64 {
		for i := range n.coll {
			if n.coll[i].key == k {
				if len(n.coll) == 1 {
					return nil, true
				}
				n = m.own(n)
				n.coll = append(n.coll[:i], n.coll[i+1:]...)
				return n, true
			}
		}
		return n, false
	}
	bit := uint32(1) << ((h >> shift) & pmapMask)
	if n.bitmap&bit == 0 {
		return n, false
	}
	i := bits.OnesCount32(n.bitmap & (bit - 1))
	s := n.slots[i]
	if s.node != nil {
		child, removed := m.del(s.node, shift+pmapBits, h, k)
		if !removed {
			return n, false
		}
		n = m.own(n)
		switch {
		case child == nil:
			n.removeSlot(i, bit)
		case len(child.slots) == 1 && child.slots[0].node == nil && child.coll == nil:
			n.slots[i] = child.slots[0] // a lone entry moves up
		default:
			n.slots[i].node = child
		}
		if len(n.slots) == 0 {
			return nil, true
		}
		return n, true
	}
	if s.e.hash != h || s.e.key != k {
		return n, false
	}
	if len(n.slots) == 1 {
		return nil, true
	}
	n = m.own(n)
	n.removeSlot(i, bit)
	return n, true
}

// removeSlot takes slot i (for bit) out of n, which the caller owns.
func (n *pnode[K, V]) removeSlot(i int, bit uint32) {
	n.bitmap &^= bit
	copy(n.slots[i:], n.slots[i+1:])
	n.slots[len(n.slots)-1] = pslot[K, V]{}
	n.slots = n.slots[:len(n.slots)-1]
}

// All yields every entry, in no particular order.
func (m pmap[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		m.root.each(yield)
	}
}

func (n *pnode[K, V]) each(yield func(K, V) bool) bool {
	if n == nil {
		return true
	}
	for _, e := range n.coll {
		if !yield(e.key, e.val) {
			return false
		}
	}
	for i := range n.slots {
		s := &n.slots[i]
		if s.node != nil {
			if !s.node.each(yield) {
				return false
			}
		} else if !yield(s.e.key, s.e.val) {
			return false
		}
	}
	return true
}
