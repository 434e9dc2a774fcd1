package search

import "math"

// BM25 is the baseline ranker: plain Okapi BM25 over each tool's name and
// description, what other gateways ship (mcpproxy-go's retrieve_tools, for
// one). Text is lowercased and split on every character that is not a letter
// or a digit (Words); there is no stemming, no splitting of camelCase, no
// other field, no query expansion. The idf is Lucene's non-negative
// ln(1 + (N - df + 0.5)/(df + 0.5)).
//
// Index builds the whole index; a BM25 is not safe for concurrent use while
// Index runs.
type BM25 struct {
	// K1 and B are the usual BM25 parameters; NewBM25 sets 1.2 and 0.75.
	K1, B float64

	ids      []string             // doc number → "server/tool"
	lens     []float64            // doc number → its length in tokens
	avgLen   float64              // mean of lens
	postings map[string][]posting // term → the docs containing it
}

type posting struct {
	doc int
	tf  float64
}

// NewBM25 returns the baseline with k1 = 1.2 and b = 0.75.
func NewBM25() *BM25 { return &BM25{K1: 1.2, B: 0.75} }

// Name implements Ranker.
func (r *BM25) Name() string { return "BM25 (name+description)" }

// Index implements Ranker.
func (r *BM25) Index(servers []Server) {
	r.ids = r.ids[:0]
	r.lens = r.lens[:0]
	r.postings = map[string][]posting{}
	total := 0.0
	for _, s := range servers {
		for _, t := range s.Tools {
			doc := len(r.ids)
			r.ids = append(r.ids, ID(s.Name, t.Name))
			words := append(Words(t.Name), Words(t.Description)...)
			tf := map[string]int{}
			for _, w := range words {
				tf[w]++
			}
			for w, n := range tf {
				r.postings[w] = append(r.postings[w], posting{doc: doc, tf: float64(n)})
			}
			r.lens = append(r.lens, float64(len(words)))
			total += float64(len(words))
		}
	}
	if len(r.ids) > 0 {
		r.avgLen = total / float64(len(r.ids))
	}
}

// Search implements Ranker: the k highest BM25 scores above zero, ties in
// index order.
func (r *BM25) Search(text string, k int) []string {
	if len(r.ids) == 0 || k <= 0 {
		return nil
	}
	return topK(r.ids, r.scores(text), k)
}

// scores is every indexed tool's BM25 score for text, by doc number.
func (r *BM25) scores(text string) []float64 {
	scores := make([]float64, len(r.ids))
	n := float64(len(r.ids))
	for _, w := range Words(text) {
		ps := r.postings[w]
		if len(ps) == 0 {
			continue
		}
		df := float64(len(ps))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range ps {
			norm := r.K1 * (1 - r.B + r.B*r.lens[p.doc]/r.avgLen)
			scores[p.doc] += idf * p.tf * (r.K1 + 1) / (p.tf + norm)
		}
	}
	return scores
}

// topK returns the ids of the k highest positive scores, best first, ties in
// index order. It keeps a min-heap of the best k seen, so a query touching
// most of the index costs O(n log k), not a sort of n.
func topK(ids []string, scores []float64, k int) []string {
	// worse reports whether doc a ranks below doc b.
	worse := func(a, b int) bool {
		if scores[a] != scores[b] {
			return scores[a] < scores[b]
		}
		return a > b
	}
	heap := make([]int, 0, k) // heap[0] is the worst of the best k
	down := func(i int) {
		for {
			l, m := 2*i+1, i
			if l < len(heap) && worse(heap[l], heap[m]) {
				m = l
			}
			if r := l + 1; r < len(heap) && worse(heap[r], heap[m]) {
				m = r
			}
			if m == i {
				return
			}
			heap[i], heap[m] = heap[m], heap[i]
			i = m
		}
	}
	for d, s := range scores {
		if s <= 0 {
			continue
		}
		if len(heap) < k {
			heap = append(heap, d)
			for i := len(heap) - 1; i > 0; {
				p := (i - 1) / 2
				if !worse(heap[i], heap[p]) {
					break
				}
				heap[i], heap[p] = heap[p], heap[i]
				i = p
			}
			continue
		}
		if worse(heap[0], d) {
			heap[0] = d
			down(0)
		}
	}
	out := make([]string, len(heap))
	for i := len(heap) - 1; i >= 0; i-- {
		out[i] = ids[heap[0]]
		heap[0] = heap[len(heap)-1]
		heap = heap[:len(heap)-1]
		down(0)
	}
	return out
}
