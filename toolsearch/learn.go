package toolsearch

import (
	"container/list"
	"slices"
	"strings"
)

// Learn records that the tool name was called after a search for text, so
// later searches rank it higher for similar text (bounded memory, local).
// Similar means sharing at least half of the distinct stemmed words
// (Jaccard similarity ≥ 0.5); the boost grows with the similarity and with
// how often the pair was learned, and is at most Options.LearnWeight times
// the search's best score. At most Options.LearnCapacity pairs are kept;
// the least recently learned goes first. Learning a name the index does not
// hold is kept but boosts nothing until the name is indexed.
func (ix *Index) Learn(text, name string) {
	if ix.learnCap <= 0 || name == "" {
		return
	}
	words := analyze(text)
	slices.Sort(words)
	words = slices.Compact(words)
	if len(words) == 0 {
		return
	}
	if len(words) > maxQueryWords {
		words = words[:maxQueryWords]
	}
	ix.learnMu.Lock()
	defer ix.learnMu.Unlock()
	ix.learned.add(words, name, ix.learnCap)
}

// learnTable is an LRU set of (query words, tool name) pairs.
type learnTable struct {
	byKey map[string]*list.Element // key → element holding *learned
	order *list.List               // front: most recently learned
}

type learned struct {
	key   string
	words []string // sorted, distinct
	name  string
	count int
}

func (lt *learnTable) init() {
	lt.byKey = map[string]*list.Element{}
	lt.order = list.New()
}

func (lt *learnTable) add(words []string, name string, capacity int) {
	key := strings.Join(words, " ") + "\x00" + name
	if el, ok := lt.byKey[key]; ok {
		el.Value.(*learned).count++
		lt.order.MoveToFront(el)
		return
	}
	lt.byKey[key] = lt.order.PushFront(&learned{key: key, words: words, name: name, count: 1})
	for lt.order.Len() > capacity {
		el := lt.order.Back()
		lt.order.Remove(el)
		delete(lt.byKey, el.Value.(*learned).key)
	}
}

// boost calls f for each learned pair similar to the query words, with the
// pair's weight: similarity × a factor that grows with its count
// (0.6 once, 0.8 twice, 1 from three times on).
func (lt *learnTable) boost(words []string, f func(name string, w float64)) {
	if lt.order.Len() == 0 || len(words) == 0 {
		return
	}
	q := slices.Clone(words)
	slices.Sort(q)
	q = slices.Compact(q)
	for el := lt.order.Front(); el != nil; el = el.Next() {
		l := el.Value.(*learned)
		sim := jaccard(q, l.words)
		if sim < 0.5 {
			continue
		}
		f(l.name, sim*min(1, 0.4+0.2*float64(l.count)))
	}
}

// jaccard is |a∩b| / |a∪b| of two sorted, distinct word lists.
func jaccard(a, b []string) float64 {
	i, j, common := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			common++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	union := len(a) + len(b) - common
	if union == 0 {
		return 0
	}
	return float64(common) / float64(union)
}
