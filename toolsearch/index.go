// Package toolsearch ranks MCP tool definitions for a query in words.
//
// An Index holds the tools of many servers, each replaced or removed as a
// whole (SetServer, RemoveServer) at a cost proportional to that server's
// tools. Search ranks with BM25F over the fields of a tool definition —
// the tool's name split into words, its title, description, parameter
// names and parameter descriptions (nested schemas included), the
// server's name and title — plus the server's instructions at server
// level. Terms are stemmed (Stem), queries are expanded with a table of
// tool-vocabulary synonyms at a lower weight, hits that cover more of the
// query's words rank higher, and Learn remembers which tool was called
// after which search. The index imports only the standard library and
// package protocol; it reads no files and needs no model.
package toolsearch

import (
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Server describes the server whose tools are indexed.
type Server struct {
	Name         string // the configured name (e.g. "github")
	Title        string // serverInfo.title (or empty)
	Instructions string // the server's initialize instructions (may be long)
}

// Entry is one tool to index.
type Entry struct {
	Name string        // the name a caller uses for it (the pool's qualified name mcp__<server>__<tool>)
	Tool protocol.Tool // its definition as the server lists it
}

// Weights are the per-field weights of BM25F: how much one occurrence of a
// query term in that field counts. A zero field takes its default (in
// parentheses); a negative one ignores the field.
type Weights struct {
	Name             float64 // the tool's name, split into words (3)
	Title            float64 // the tool's title and annotations' title (2)
	Description      float64 // the tool's description (1)
	ParamName        float64 // parameter names, nested ones too (0.6)
	ParamDescription float64 // parameter descriptions, titles, enum values (0.4)
	Server           float64 // the server's name and title (1)
	Instructions     float64 // the server's instructions, scored per server (0.3)
}

// Options tunes an Index; the zero value is good.
type Options struct {
	Weights Weights
	// K1 is BM25's term-frequency saturation; 0 means 1.2.
	K1 float64
	// ExpansionWeight is how much a synonym found by query expansion
	// counts against a word of the query itself; 0 means 0.3, negative
	// turns expansion off.
	ExpansionWeight float64
	// Synonyms are more groups of interchangeable words or phrases,
	// added to the built-in table.
	Synonyms [][]string
	// LearnCapacity bounds how many query→tool associations Learn keeps
	// (least recently used go first); 0 means 1024, negative turns
	// learning off.
	LearnCapacity int
	// LearnWeight scales the boost a learned association gives, in units
	// of the search's best score; 0 means 1.
	LearnWeight float64
	// Feedback turns on pseudo-relevance feedback: the words of the names
	// and titles of the best Feedback tools of a first ranking are added
	// to the query, at FeedbackWeight (0 means 0.2), and the tools ranked
	// again. 0 (the default) turns it off.
	Feedback       int
	FeedbackWeight float64
}

// Fields of a tool document.
const (
	fName = iota
	fTitle
	fDesc
	fParamName
	fParamDesc
	fServer
	numFields
)

// fieldB is BM25's length normalisation per field: short fields (names)
// are normalised less than prose.
var fieldB = [numFields]float64{0.5, 0.5, 0.75, 0.5, 0.75, 0.3}

// posting is one document's term frequencies, per field, for one term.
type posting struct {
	doc int32
	tf  [numFields]uint8
}

// document is one indexed tool.
type document struct {
	live     bool
	readOnly bool
	server   int32 // slot in Index.servers
	name     string
	tool     protocol.Tool
	flen     [numFields]uint16
	terms    []int32 // the document's distinct term ids, ascending
	pos      []int32 // pos[i]: this document's index in terms[terms[i]].postings
}

// docMeta is the part of a document the scoring loop reads.
type docMeta struct {
	server   int32
	readOnly bool
	flen     [numFields]uint16
}

// term is one distinct stemmed word and where it occurs.
type term struct {
	text     string
	postings []posting // unordered; a removal swaps the last into the hole
}

// serverDoc is one indexed server.
type serverDoc struct {
	live     bool
	srv      Server
	docs     []int32
	instr    map[string]uint16 // instruction term → frequency
	instrLen int
}

// Index is a search index of tool definitions. An *Index is safe for
// concurrent use: writers (SetServer, RemoveServer) take mu exclusively,
// Search takes it shared, and the learned associations have their own
// lock (learnMu, always taken after mu when both are held).
type Index struct {
	// Set by New, read-only afterwards.
	w          [numFields]float64
	wInstr     float64
	k1         float64
	expWeight  float64
	learnCap   int
	learnW     float64
	feedback   int
	feedbackW  float64
	expansions []expansion
	expandBy   map[string][]int32 // stem → expansions it belongs to

	mu sync.RWMutex // guards every field below, up to learnMu
	// dict maps a term's text to its id, an index into terms.
	dict      map[string]int32
	terms     []term
	freeTerms []int32
	// docs are the tool documents by id; freeDocs are ids of removed ones.
	// meta holds, by the same id, what a search reads of every posting's
	// document, packed apart from the rest for the cache's sake.
	docs     []document
	meta     []docMeta
	freeDocs []int32
	byName   map[string]int32 // Entry.Name → document id
	nDocs    int
	totalLen [numFields]int64
	// servers are the indexed servers by slot; slot maps a name to its.
	servers     []serverDoc
	slot        map[string]int32
	freeServers []int32
	// instrPost maps an instruction term to the servers (slots) using it
	// and its frequency there.
	instrPost     map[string]map[int32]uint16
	nInstrServers int
	instrTotalLen int64

	learnMu sync.Mutex // guards learned
	learned learnTable

	scratch sync.Pool // *scratch, per-search buffers
}

// New returns an empty index. An *Index is safe for concurrent use.
func New(o Options) *Index {
	def := func(v, d float64) float64 {
		switch {
		case v == 0:
			return d
		case v < 0:
			return 0
		}
		return v
	}
	ix := &Index{
		k1:        def(o.K1, 1.2),
		expWeight: def(o.ExpansionWeight, 0.3),
		learnCap:  o.LearnCapacity,
		learnW:    def(o.LearnWeight, 1),
		feedback:  max(o.Feedback, 0),
		feedbackW: def(o.FeedbackWeight, 0.2),
		wInstr:    def(o.Weights.Instructions, 0.3),
		dict:      map[string]int32{},
		byName:    map[string]int32{},
		slot:      map[string]int32{},
		instrPost: map[string]map[int32]uint16{},
	}
	ix.w = [numFields]float64{
		def(o.Weights.Name, 3), def(o.Weights.Title, 2), def(o.Weights.Description, 1),
		def(o.Weights.ParamName, 0.6), def(o.Weights.ParamDescription, 0.4), def(o.Weights.Server, 1),
	}
	switch {
	case ix.learnCap == 0:
		ix.learnCap = 1024
	case ix.learnCap < 0:
		ix.learnCap = 0
	}
	ix.learned.init()
	ix.expansions = append(slices.Clone(builtinExpansions), analyzeGroups(o.Synonyms)...)
	ix.expandBy = map[string][]int32{}
	for gi, g := range ix.expansions {
		for _, member := range g {
			for _, t := range member {
				if ids := ix.expandBy[t]; len(ids) == 0 || ids[len(ids)-1] != int32(gi) {
					ix.expandBy[t] = append(ids, int32(gi))
				}
			}
		}
	}
	return ix
}

// Len is the number of tools indexed.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.nDocs
}

// SetServer replaces everything indexed for srv.Name by tools; its cost is
// proportional to len(tools) (and to the tools it replaces), not to the
// index's size. An entry with an empty Name is indexed under Tool.Name;
// one with neither is skipped. The index keeps the tools' definitions as
// given; the caller must not modify them afterwards.
func (ix *Index) SetServer(srv Server, tools []Entry) {
	// Analyse outside the lock: it is most of the cost.
	prepared := make([]preparedDoc, 0, len(tools))
	serverTerms := analyze(srv.Name + " " + srv.Title)
	for _, e := range tools {
		if p, ok := prepare(e, serverTerms); ok {
			prepared = append(prepared, p)
		}
	}
	instr := analyze(srv.Instructions)

	ix.mu.Lock()
	defer ix.mu.Unlock()
	s, ok := ix.slot[srv.Name]
	if ok {
		ix.clearServer(s)
	} else {
		if n := len(ix.freeServers); n > 0 {
			s = ix.freeServers[n-1]
			ix.freeServers = ix.freeServers[:n-1]
		} else {
			s = int32(len(ix.servers))
			ix.servers = append(ix.servers, serverDoc{})
		}
		ix.slot[srv.Name] = s
	}
	sd := &ix.servers[s]
	sd.live = true
	sd.srv = srv
	sd.docs = sd.docs[:0]
	if len(instr) > 0 {
		sd.instr = map[string]uint16{}
		for _, t := range instr {
			if sd.instr[t] < math.MaxUint16 {
				sd.instr[t]++
			}
		}
		sd.instrLen = len(instr)
		for t, tf := range sd.instr {
			post := ix.instrPost[t]
			if post == nil {
				post = map[int32]uint16{}
				ix.instrPost[t] = post
			}
			post[s] = tf
		}
		ix.nInstrServers++
		ix.instrTotalLen += int64(sd.instrLen)
	}
	for i := range prepared {
		d := ix.addDoc(s, &prepared[i])
		ix.servers[s].docs = append(ix.servers[s].docs, d)
	}
}

// RemoveServer drops a server's tools. Removing a server that is not
// indexed does nothing.
func (ix *Index) RemoveServer(name string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	s, ok := ix.slot[name]
	if !ok {
		return
	}
	ix.clearServer(s)
	ix.servers[s] = serverDoc{}
	delete(ix.slot, name)
	ix.freeServers = append(ix.freeServers, s)
}

// clearServer removes slot s's documents and instructions; mu held.
func (ix *Index) clearServer(s int32) {
	sd := &ix.servers[s]
	for _, d := range sd.docs {
		ix.removeDoc(d)
	}
	sd.docs = sd.docs[:0]
	if sd.instr != nil {
		for t := range sd.instr {
			post := ix.instrPost[t]
			delete(post, s)
			if len(post) == 0 {
				delete(ix.instrPost, t)
			}
		}
		ix.nInstrServers--
		ix.instrTotalLen -= int64(sd.instrLen)
		sd.instr = nil
		sd.instrLen = 0
	}
}

// preparedDoc is a tool analysed, ready to be added under the lock.
type preparedDoc struct {
	name     string
	tool     protocol.Tool
	readOnly bool
	flen     [numFields]uint16
	texts    []string // distinct terms
	tfs      [][numFields]uint8
}

// prepare analyses one entry's fields.
func prepare(e Entry, serverTerms []string) (preparedDoc, bool) {
	p := preparedDoc{name: e.Name, tool: e.Tool}
	if p.name == "" {
		p.name = e.Tool.Name
	}
	if p.name == "" {
		return p, false
	}
	toolName := e.Tool.Name
	if toolName == "" {
		toolName = p.name
	}
	title := e.Tool.Title
	if a := e.Tool.Annotations; a != nil {
		if a.Title != "" && a.Title != title {
			title += " " + a.Title
		}
		p.readOnly = a.ReadOnlyHint != nil && *a.ReadOnlyHint
	}
	schema := readSchema(e.Tool.InputSchema)
	fields := [numFields][]string{
		fName:      analyze(toolName),
		fTitle:     analyze(title),
		fDesc:      analyze(e.Tool.Description),
		fParamName: analyze(strings.Join(schema.names, " ")),
		fParamDesc: analyze(strings.Join(schema.descs, " \n ")),
		fServer:    serverTerms,
	}
	at := map[string]int{}
	for f, toks := range fields {
		p.flen[f] = uint16(min(len(toks), math.MaxUint16))
		for _, t := range toks {
			i, ok := at[t]
			if !ok {
				i = len(p.texts)
				at[t] = i
				p.texts = append(p.texts, t)
				p.tfs = append(p.tfs, [numFields]uint8{})
			}
			if p.tfs[i][f] < math.MaxUint8 {
				p.tfs[i][f]++
			}
		}
	}
	return p, true
}

// addDoc indexes a prepared tool under server slot s; mu held.
func (ix *Index) addDoc(s int32, p *preparedDoc) int32 {
	var d int32
	if n := len(ix.freeDocs); n > 0 {
		d = ix.freeDocs[n-1]
		ix.freeDocs = ix.freeDocs[:n-1]
	} else {
		d = int32(len(ix.docs))
		ix.docs = append(ix.docs, document{})
		ix.meta = append(ix.meta, docMeta{})
	}
	type tp struct{ t, p int32 }
	pairs := make([]tp, len(p.texts))
	for i, text := range p.texts {
		t, ok := ix.dict[text]
		if !ok {
			if n := len(ix.freeTerms); n > 0 {
				t = ix.freeTerms[n-1]
				ix.freeTerms = ix.freeTerms[:n-1]
				ix.terms[t].text = text
			} else {
				t = int32(len(ix.terms))
				ix.terms = append(ix.terms, term{text: text})
			}
			ix.dict[text] = t
		}
		pairs[i] = tp{t, int32(len(ix.terms[t].postings))}
		ix.terms[t].postings = append(ix.terms[t].postings, posting{doc: d, tf: p.tfs[i]})
	}
	slices.SortFunc(pairs, func(a, b tp) int { return int(a.t - b.t) })
	ix.meta[d] = docMeta{server: s, readOnly: p.readOnly, flen: p.flen}
	doc := &ix.docs[d]
	*doc = document{live: true, readOnly: p.readOnly, server: s, name: p.name, tool: p.tool, flen: p.flen,
		terms: make([]int32, len(pairs)), pos: make([]int32, len(pairs))}
	for i, x := range pairs {
		doc.terms[i], doc.pos[i] = x.t, x.p
	}
	for f := range numFields {
		ix.totalLen[f] += int64(p.flen[f])
	}
	ix.nDocs++
	ix.byName[p.name] = d
	return d
}

// removeDoc drops document d from every posting list it is in; mu held.
// Each removal moves the list's last posting into the hole and updates
// that document's position, so the cost is the document's term count
// (times a binary search), not the lists' lengths.
func (ix *Index) removeDoc(d int32) {
	doc := &ix.docs[d]
	for i, t := range doc.terms {
		pl := ix.terms[t].postings
		p, last := doc.pos[i], int32(len(pl)-1)
		if p != last {
			moved := pl[last]
			pl[p] = moved
			md := &ix.docs[moved.doc]
			j, _ := slices.BinarySearch(md.terms, t)
			md.pos[j] = p
		}
		ix.terms[t].postings = pl[:last]
		if last == 0 {
			delete(ix.dict, ix.terms[t].text)
			ix.terms[t] = term{}
			ix.freeTerms = append(ix.freeTerms, t)
		}
	}
	for f := range numFields {
		ix.totalLen[f] -= int64(doc.flen[f])
	}
	ix.nDocs--
	if ix.byName[doc.name] == d {
		delete(ix.byName, doc.name)
	}
	*doc = document{}
	ix.meta[d] = docMeta{}
	ix.freeDocs = append(ix.freeDocs, d)
}
