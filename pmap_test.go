package mcpvisor

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPmapMatchesAMap runs random sets and deletes on a pmap and a Go
// map side by side, in builds and outside them, and checks after each
// step that they agree and that every earlier snapshot still holds what
// it held.
func TestPmapMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var m pmap[string, int]
	ref := map[string]int{}
	type snapshot struct {
		m   pmap[string, int]
		ref map[string]int
	}
	var snaps []snapshot
	// check compares with plain comparisons (require only to report a
	// difference): the map holds up to 2,000 keys and check runs 600
	// times, and reflection and a require call per key took most of the
	// test's time under -race.
	check := func(m pmap[string, int], ref map[string]int) {
		t.Helper()
		require.Equal(t, len(ref), m.Len())
		if got := maps.Collect(m.All()); !maps.Equal(ref, got) {
			require.Equal(t, ref, got) // for the diff
		}
		for k, v := range ref {
			if w, ok := m.Get(k); !ok || w != v {
				t.Fatalf("Get(%q) = %d, %v; want %d, true", k, w, ok, v)
			}
		}
	}
	for round := range 300 {
		building := round%3 != 0
		if building {
			m.edit()
		}
		for range rng.IntN(40) {
			k := fmt.Sprintf("k%d", rng.IntN(2000))
			if rng.IntN(3) == 0 {
				m.Delete(k)
				delete(ref, k)
			} else {
				v := rng.Int()
				m.Set(k, v)
				ref[k] = v
			}
		}
		if building {
			m.freeze()
		}
		_, missing := m.Get("absent")
		require.False(t, missing)
		check(m, ref)
		snaps = append(snaps, snapshot{m, maps.Clone(ref)})
	}
	for _, s := range snaps {
		check(s.m, s.ref)
	}
	for k := range maps.Clone(ref) {
		m.Delete(k)
		delete(ref, k)
	}
	check(m, ref)
	require.Nil(t, m.root, "an emptied map holds no nodes")
}

// TestPmapKeysWhoseHashesCollide: keys whose hashes agree in every bit
// share the trie's last level.
func TestPmapKeysWhoseHashesCollide(t *testing.T) {
	var m pmap[string, int]
	// The trie is driven by the hash alone: build the collision by hand.
	m.root, _ = m.set(nil, 0, pentry[string, int]{hash: 7, key: "a", val: 1})
	m.root, _ = m.set(m.root, 0, pentry[string, int]{hash: 7, key: "b", val: 2})
	m.n = 2
	var keys []string
	for k := range m.All() {
		keys = append(keys, k)
	}
	require.ElementsMatch(t, []string{"a", "b"}, keys)
	root, removed := m.del(m.root, 0, 7, "a")
	require.True(t, removed)
	root, removed = m.del(root, 0, 7, "b")
	require.True(t, removed)
	require.Nil(t, root)
}
