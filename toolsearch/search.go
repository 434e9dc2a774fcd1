package toolsearch

import (
	"math"
	"math/bits"
	"slices"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Query is one search.
type Query struct {
	Text     string                 // what the caller is looking for, in words
	Limit    int                    // most hits returned; 0 means 10
	Servers  []string               // when not empty, only these servers' tools
	ReadOnly bool                   // only tools annotated readOnlyHint: true
	Allow    func(name string) bool // when set, only names it allows (permissions, identity)
}

// Hit is one ranked result.
type Hit struct {
	Name   string        // Entry.Name
	Server string        // Server.Name
	Tool   protocol.Tool // the full definition
	Score  float64       // higher is better; comparable within one Search only
}

// qterm is one term a search looks for.
type qterm struct {
	text   string
	weight float64 // 1 for a word of the query, less for an expansion
	group  int     // the query word it stands for (coverage), < 64
}

// maxQueryWords bounds the distinct words of a query that are searched;
// each has a bit of a document's match mask, and bit 63 is kept for
// terms that count for no word (feedback, learning).
const maxQueryWords = 63

// noWord is the mask bit of terms that stand for no query word.
const noWord = 63

// queryTerms analyses a query: its distinct stems (at most 64), then the
// words of synonym groups the query triggers at the expansion weight. A
// group triggers when the query holds every word of one of its members;
// the other members' words then count for the query word that triggered it.
func (ix *Index) queryTerms(text string) (terms []qterm, words []string) {
	seen := map[string]int{}
	for _, t := range analyze(text) {
		if _, ok := seen[t]; ok {
			continue
		}
		if len(words) == maxQueryWords {
			break
		}
		seen[t] = len(terms)
		words = append(words, t)
		terms = append(terms, qterm{text: t, weight: 1, group: len(words) - 1})
	}
	if ix.expWeight <= 0 {
		return terms, words
	}
	for _, w := range words {
		for _, gi := range ix.expandBy[w] {
			g := ix.expansions[gi]
			group := -1
			for _, member := range g {
				if covered(member, seen) {
					group = terms[seen[member[0]]].group
					break
				}
			}
			if group < 0 {
				continue
			}
			for _, member := range g {
				if covered(member, seen) {
					continue
				}
				for _, t := range member {
					if _, ok := seen[t]; ok {
						continue
					}
					seen[t] = len(terms)
					terms = append(terms, qterm{text: t, weight: ix.expWeight, group: group})
				}
			}
		}
	}
	return terms, words
}

// covered reports whether every word of member is among the query's terms
// already seen with full weight or as expansions.
func covered(member []string, seen map[string]int) bool {
	for _, t := range member {
		if _, ok := seen[t]; !ok {
			return false
		}
	}
	return true
}

// scratch is one search's working memory, indexed by document id.
type scratch struct {
	score   []float64
	mask    []uint64
	touched []int32
	srvOK   []bool
	srvB    []float64
	inv     [numFields][normTable]float64
}

// normTable is how many field lengths a search tabulates the length
// normalisation of; longer fields compute it.
const normTable = 128

func (ix *Index) getScratch(nDocs, nServers int) *scratch {
	sc, _ := ix.scratch.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	if len(sc.score) < nDocs {
		sc.score = make([]float64, nDocs)
		sc.mask = make([]uint64, nDocs)
	}
	if len(sc.srvOK) < nServers {
		sc.srvOK = make([]bool, nServers)
		sc.srvB = make([]float64, nServers)
	}
	sc.touched = sc.touched[:0]
	return sc
}

func (ix *Index) putScratch(sc *scratch) {
	for _, d := range sc.touched {
		sc.score[d], sc.mask[d] = 0, 0
	}
	clear(sc.srvOK)
	clear(sc.srvB)
	sc.touched = sc.touched[:0]
	ix.scratch.Put(sc)
}

// Search returns the best hits for q, best first (no hit with score <= 0).
// Equal scores are ordered by name. A query with no searchable word finds
// nothing. Allow, when set, is called only for candidates, best first,
// until Limit hits are allowed, and never with the index's lock held
// for writing (Search holds it for reading).
func (ix *Index) Search(q Query) []Hit {
	limit := q.Limit
	if limit <= 0 {
		limit = 10
	}
	terms, words := ix.queryTerms(q.Text)
	if len(terms) == 0 {
		return nil
	}

	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.nDocs == 0 {
		return nil
	}
	sc := ix.getScratch(len(ix.docs), len(ix.servers))
	defer ix.putScratch(sc)

	// Which servers may answer.
	if len(q.Servers) == 0 {
		for s := range ix.servers {
			sc.srvOK[s] = ix.servers[s].live
		}
	} else {
		for _, name := range q.Servers {
			if s, ok := ix.slot[name]; ok {
				sc.srvOK[s] = true
			}
		}
	}

	// BM25F over the tool fields. inv[f][l] is field f's weight over its
	// length normalisation for a length of l, tabulated once per search.
	n := float64(ix.nDocs)
	var norm [numFields]float64 // B_f / avg length of f
	for f := range numFields {
		if ix.totalLen[f] > 0 {
			norm[f] = fieldB[f] * n / float64(ix.totalLen[f])
		}
	}
	inv := &sc.inv
	for f := range numFields {
		for l := range normTable {
			inv[f][l] = ix.w[f] / (1 - fieldB[f] + norm[f]*float64(l))
		}
	}
	k1 := ix.k1
	score := func(terms []qterm) {
		for _, qt := range terms {
			t, ok := ix.dict[qt.text]
			if !ok {
				continue
			}
			pl := ix.terms[t].postings
			df := float64(len(pl))
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			wq := qt.weight * idf * (k1 + 1)
			bit := uint64(1) << uint(qt.group)
			for i := range pl {
				p := &pl[i]
				m := &ix.meta[p.doc]
				if !sc.srvOK[m.server] || (q.ReadOnly && !m.readOnly) {
					continue
				}
				var tfw float64
				for f, tf := range p.tf {
					if tf != 0 {
						if l := m.flen[f]; l < normTable {
							tfw += float64(tf) * inv[f][l]
						} else {
							tfw += float64(tf) * ix.w[f] / (1 - fieldB[f] + norm[f]*float64(l))
						}
					}
				}
				if tfw == 0 {
					continue
				}
				if sc.mask[p.doc] == 0 {
					sc.touched = append(sc.touched, p.doc)
				}
				sc.score[p.doc] += wq * tfw / (k1 + tfw)
				sc.mask[p.doc] |= bit
			}
		}
	}
	score(terms)
	if ix.feedback > 0 && len(sc.touched) > 0 {
		if more := ix.feedbackTerms(sc, terms); len(more) > 0 {
			terms = append(terms, more...)
			score(more)
		}
	}

	// The servers' instructions, scored per server and added to that
	// server's matching tools.
	if ix.wInstr > 0 && ix.nInstrServers > 0 {
		ns := float64(ix.nInstrServers)
		avg := float64(ix.instrTotalLen) / ns
		any := false
		for _, qt := range terms {
			post := ix.instrPost[qt.text]
			if len(post) == 0 {
				continue
			}
			df := float64(len(post))
			idf := math.Log(1 + (ns-df+0.5)/(df+0.5))
			for s, tf := range post {
				if !sc.srvOK[s] {
					continue
				}
				ntf := float64(tf) / (0.25 + 0.75*float64(ix.servers[s].instrLen)/avg)
				sc.srvB[s] += ix.wInstr * qt.weight * idf * ntf * (k1 + 1) / (k1 + ntf)
				any = true
			}
		}
		if any {
			for _, d := range sc.touched {
				sc.score[d] += sc.srvB[ix.meta[d].server]
			}
		}
	}

	// Coverage: a tool that matches more of the query's words ranks higher.
	best := 0.0
	if nw := len(words); nw > 1 {
		wordBits := uint64(1)<<uint(nw) - 1 // nw < 64: maxQueryWords leaves bit 63 free
		for _, d := range sc.touched {
			cov := float64(bits.OnesCount64(sc.mask[d]&wordBits)) / float64(nw)
			sc.score[d] *= (1 + cov) / 2
		}
	}
	for _, d := range sc.touched {
		best = max(best, sc.score[d])
	}

	// Learned associations: each similar learned pair adds its weight
	// to its tool, at most 1 in all, times LearnWeight × the best score.
	if ix.learnCap > 0 {
		if best == 0 {
			best = 1
		}
		var boosts map[int32]float64
		ix.learnMu.Lock()
		ix.learned.boost(words, func(name string, w float64) {
			d, ok := ix.byName[name]
			if !ok {
				return
			}
			m := &ix.meta[d]
			if !sc.srvOK[m.server] || (q.ReadOnly && !m.readOnly) {
				return
			}
			if boosts == nil {
				boosts = map[int32]float64{}
			}
			boosts[d] += w
		})
		ix.learnMu.Unlock()
		for d, w := range boosts {
			if sc.mask[d] == 0 {
				sc.touched = append(sc.touched, d)
				sc.mask[d] = 1 << noWord // touched, matched no word
			}
			sc.score[d] += ix.learnW * min(w, 1) * best
		}
	}

	return ix.collect(sc, limit, q.Allow)
}

// collect picks the best allowed hits from the touched documents.
func (ix *Index) collect(sc *scratch, limit int, allow func(string) bool) []Hit {
	cands := sc.touched[:0:0]
	for _, d := range sc.touched {
		if sc.score[d] > 0 {
			cands = append(cands, d)
		}
	}
	better := func(a, b int32) bool {
		if sa, sb := sc.score[a], sc.score[b]; sa != sb {
			return sa > sb
		}
		return ix.docs[a].name < ix.docs[b].name
	}
	var hits []Hit
	take := func(d int32) bool {
		doc := &ix.docs[d]
		if allow != nil && !allow(doc.name) {
			return false
		}
		hits = append(hits, Hit{Name: doc.name, Server: ix.servers[doc.server].srv.Name, Tool: doc.tool, Score: sc.score[d]})
		return len(hits) == limit
	}
	if len(cands) <= 4*limit {
		slices.SortFunc(cands, func(a, b int32) int {
			if better(a, b) {
				return -1
			}
			if better(b, a) {
				return 1
			}
			return 0
		})
		for _, d := range cands {
			if take(d) {
				break
			}
		}
		return hits
	}
	// A heap, so only as many candidates as needed are ordered.
	h := cands
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			m := l
			if r := l + 1; r < len(h) && better(h[r], h[l]) {
				m = r
			}
			if !better(h[m], h[i]) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}
	for len(h) > 0 {
		d := h[0]
		h[0] = h[len(h)-1]
		h = h[:len(h)-1]
		down(0)
		if take(d) {
			break
		}
	}
	return hits
}

// Terms returns the stemmed words the index would search for text,
// expansions included, with their weights: for explaining a ranking.
func (ix *Index) Terms(text string) map[string]float64 {
	terms, _ := ix.queryTerms(text)
	out := make(map[string]float64, len(terms))
	for _, t := range terms {
		out[t.text] = t.weight
	}
	return out
}

// feedbackTerms is pseudo-relevance feedback (Options.Feedback): the words
// of the names and titles of the best documents so far that the query
// lacks, each weighted by the share of those documents it occurs in, times
// Options.FeedbackWeight. mu held for reading.
func (ix *Index) feedbackTerms(sc *scratch, terms []qterm) []qterm {
	top := make([]int32, 0, ix.feedback)
	for _, d := range sc.touched {
		if len(top) < ix.feedback {
			top = append(top, d)
		} else if sc.score[d] > sc.score[top[len(top)-1]] ||
			(sc.score[d] == sc.score[top[len(top)-1]] && ix.docs[d].name < ix.docs[top[len(top)-1]].name) {
			top[len(top)-1] = d
		} else {
			continue
		}
		// Keep top ordered, best first.
		for i := len(top) - 1; i > 0; i-- {
			a, b := top[i], top[i-1]
			if sc.score[a] > sc.score[b] || (sc.score[a] == sc.score[b] && ix.docs[a].name < ix.docs[b].name) {
				top[i], top[i-1] = b, a
			}
		}
	}
	have := make(map[string]bool, len(terms))
	for _, t := range terms {
		have[t.text] = true
	}
	count := map[int32]int{}
	var order []int32
	for _, d := range top {
		doc := &ix.docs[d]
		for i, t := range doc.terms {
			p := ix.terms[t].postings[doc.pos[i]]
			if p.tf[fName] == 0 && p.tf[fTitle] == 0 {
				continue
			}
			if have[ix.terms[t].text] {
				continue
			}
			if count[t] == 0 {
				order = append(order, t)
			}
			count[t]++
		}
	}
	var out []qterm
	for _, t := range order {
		out = append(out, qterm{text: ix.terms[t].text, weight: ix.feedbackW * float64(count[t]) / float64(len(top)), group: noWord})
	}
	return out
}
