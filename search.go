package mcpvisor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/toolsearch"
)

// Tool search over the pool (docs/search.md): SearchTools ranks the
// pool's tools for a request in words with package toolsearch, and
// DescribeTool gives one tool's full definition.
//
// The index follows the published pool incrementally. A search first
// brings the index up to the pool it reads (toolSearch.sync): a server
// whose offer (pool_offer.go) is the one already indexed is left alone,
// one with a new offer (it listed again, its filter or trust changed, its
// list_changed arrived) is re-indexed alone (SetServer), and one no longer
// offering is removed (RemoveServer). The comparison costs a pointer per
// server; the re-indexing is proportional to the changed servers' tools.
// The registry goroutine, which publishes pools, does no indexing: a pool
// nobody searches costs nothing.
//
// A lazy server's tools are in the pool from the discovery cache before
// it first connects (discovery.go), so they are indexed and found like any
// other; a call to one starts the server. A deferred server's tools
// (ServerConfig.Defer) are indexed like the rest: search is how they are
// meant to be found. A tool the per-server Tools filter drops never enters
// the pool; one a permission rule denies is never returned.

// SearchOptions narrows a SearchTools; the zero value searches every
// server for up to 10 tools.
type SearchOptions struct {
	// Limit is the most matches returned; 0 (or less) means 10.
	Limit int
	// Servers, when not empty, restricts the search to these servers'
	// tools (configured names).
	Servers []string
	// ReadOnly restricts the search to tools annotated readOnlyHint:
	// true (a hint, unless Tool.Trusted).
	ReadOnly bool
	// Allow, when set, restricts the search to the qualified names it
	// allows (the caller's own policy: an identity's tools, say), on top
	// of the permission rules. It is called only for candidates, best
	// first, until Limit are allowed, from SearchTools' goroutine.
	Allow func(name string) bool
}

// ToolMatch is one tool SearchTools found.
type ToolMatch struct {
	// Tool is the pool's tool (Name is the qualified name to call) with
	// its full definition: the description not cut to
	// Options.MaxDescriptionLength, the whole inputSchema.
	Tool Tool
	// Summary is the description's first sentence or line, at most about
	// 200 bytes: what to show in a list of matches.
	Summary string
	// Score ranks the match, higher is better; it compares matches of one
	// search only.
	Score float64
}

// SearchTools returns the pool's tools that best match query (what the
// caller looks for, in words), best first, at most o.Limit of them. A
// query with no searchable word matches nothing (an empty result, no
// error). Tools a permission Deny rule matches are never returned. The
// error is ctx's, or ErrClosed.
func (s *Supervisor) SearchTools(ctx context.Context, query string, o SearchOptions) ([]ToolMatch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-s.closed:
		return nil, ErrClosed
	default:
	}
	q := toolsearch.Query{Text: query, Limit: o.Limit, Servers: o.Servers, ReadOnly: o.ReadOnly}
	var deny []string
	if set := s.permissions.rules.Load(); len(set.rules.Deny) > 0 {
		deny = set.rules.Deny
	}
	if allow := o.Allow; deny != nil || allow != nil {
		q.Allow = func(name string) bool {
			if _, denied := firstMatch(deny, name); denied {
				return false
			}
			return allow == nil || allow(name)
		}
	}
	matches := s.search.run(&s.published, q)
	s.search.remember(query, matches)
	return matches, nil
}

// DescribeTool returns the pool tool called name (a qualified name, or a
// built-in's) with its full definition: the description not cut to
// Options.MaxDescriptionLength, the whole inputSchema. A lazy server's
// tools are described from the discovery cache before it connects, a
// parked server's from its last listing. The error is ErrUnknownTool when
// no such tool is routed, ErrCallDenied when a permission rule denies it.
func (s *Supervisor) DescribeTool(name string) (Tool, error) {
	p := s.pool.Load()
	if b, ok := p.builtinByName[name]; ok {
		return Tool{Name: name, Builtin: true, Definition: b.Definition}, nil
	}
	e, ok := p.toolsByName.Get(name)
	if !ok {
		e, ok = p.hiddenTools.Get(name)
	}
	if !ok {
		return Tool{}, fmt.Errorf("%w: %q", ErrUnknownTool, name)
	}
	if set := s.permissions.rules.Load(); len(set.rules.Deny) > 0 {
		if pat, denied := firstMatch(set.rules.Deny, name); denied {
			return Tool{}, fmt.Errorf("%w: %s (deny rule %q)", ErrCallDenied, name, pat)
		}
	}
	v := e.h.view.Load()
	for _, t := range v.lists.tools {
		if t.Name == e.name {
			return Tool{Name: name, Server: e.h.name, Trusted: v.cfg.Trust == TrustTrusted, Deferred: v.cfg.Defer, Definition: t}, nil
		}
	}
	// The view moved on since the pool was read: the pool's copy.
	for _, t := range p.tools {
		if t.Name == name {
			return *t, nil
		}
	}
	return Tool{}, fmt.Errorf("%w: %q", ErrUnknownTool, name)
}

// Learning: a call that succeeds on a tool a recent search returned
// teaches the index that query → tool (toolsearch.Index.Learn).
const (
	learnWindow    = 5 * time.Minute // how long a search's hits may be learned from
	recentSearches = 32              // searches remembered for learning
)

// toolSearch is a Supervisor's search index and what it remembers of
// recent searches.
//
// Concurrency: mu guards index (created at the first search), synced,
// servers and byName, and is held through a whole search, so that the
// index and the tools it returns are of one pool. recentMu guards recent;
// anyRecent lets a call skip recentMu when no search ever ran.
type toolSearch struct {
	mu      sync.Mutex
	index   *toolsearch.Index
	synced  *pool                      // the pool the index reflects
	servers map[string]*searchedServer // by server name: what is indexed of it
	byName  map[string]*Tool           // qualified name → the tool, full definition
	// indexed counts SetServer calls per server (tests: a list_changed
	// re-indexes that server alone).
	indexed map[string]int

	recentMu  sync.Mutex
	recent    []recentSearch // oldest first, at most recentSearches
	anyRecent atomic.Bool
}

// searchedServer is what the index holds of one server.
type searchedServer struct {
	h     *serverHandle
	offer *offer   // the offer indexed; a new one means re-indexing
	names []string // the qualified names indexed, in offer order
}

// recentSearch is one search's query and the names it returned.
type recentSearch struct {
	at    time.Time
	query string
	names []string
}

// run brings the index up to the latest published pool and searches it.
// The pool is read under mu, so the index only ever moves forward.
func (ts *toolSearch) run(pub *published, q toolsearch.Query) []ToolMatch {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.sync(pub.pool.Load())
	hits := ts.index.Search(q)
	out := make([]ToolMatch, 0, len(hits))
	for _, h := range hits {
		t := ts.byName[h.Name]
		if t == nil {
			continue // cannot happen: the index and byName change together
		}
		out = append(out, ToolMatch{Tool: *t, Summary: summarize(t.Definition.Description), Score: h.Score})
	}
	return out
}

// sync makes the index reflect p: re-indexes the servers whose offer is
// not the one indexed, removes those no longer offering; mu held.
func (ts *toolSearch) sync(p *pool) {
	if ts.index == nil {
		ts.index = toolsearch.New(toolsearch.Options{})
		ts.servers = map[string]*searchedServer{}
		ts.byName = map[string]*Tool{}
		ts.indexed = map[string]int{}
	}
	if p == ts.synced {
		return
	}
	// With renames in the pool, a server's names may change while its
	// offer does not: check each server's names then (rare: collisions).
	checkNames := len(p.renamed) > 0 || len(p.collisions) > 0
	seen := make(map[string]bool, len(ts.servers))
	for h, pv := range p.views.All() {
		if pv.offer == nil || len(pv.offer.tools) == 0 || pv.view == nil {
			continue
		}
		name := h.name
		seen[name] = true
		old := ts.servers[name]
		if old != nil && old.h == h && old.offer == pv.offer &&
			(!checkNames || sameNames(old.names, routedNames(p, h, pv.offer))) {
			continue
		}
		ts.reindex(p, h, pv)
	}
	for name, old := range ts.servers {
		if !seen[name] {
			ts.index.RemoveServer(name)
			ts.forget(old)
			delete(ts.servers, name)
		}
	}
	ts.synced = p
}

// reindex indexes server h's offer pv under the names p gives its tools,
// replacing what was indexed of it; mu held.
func (ts *toolSearch) reindex(p *pool, h *serverHandle, pv pooledView) {
	name, v := h.name, pv.view
	if old := ts.servers[name]; old != nil {
		ts.forget(old)
	}
	// The offer's descriptions are capped; the index and the matches
	// want the server's own.
	full := make(map[string]protocol.Tool, len(v.lists.tools))
	for _, t := range v.lists.tools {
		full[t.Name] = t
	}
	names := routedNames(p, h, pv.offer)
	entries := make([]toolsearch.Entry, 0, len(names))
	for i := range pv.offer.tools {
		if names[i] == "" {
			continue
		}
		t := pv.offer.tools[i].tool
		t.Name = names[i]
		if def, ok := full[t.Definition.Name]; ok {
			t.Definition = def
		}
		ts.byName[t.Name] = &t
		entries = append(entries, toolsearch.Entry{Name: t.Name, Tool: t.Definition})
	}
	srv := toolsearch.Server{Name: name, Title: v.serverInfo.Title}
	if v.sess != nil {
		srv.Instructions = v.sess.Peer().Instructions
	}
	ts.index.SetServer(srv, entries)
	ts.indexed[name]++
	ts.servers[name] = &searchedServer{h: h, offer: pv.offer, names: names}
}

// forget drops a server's tools from byName; mu held.
func (ts *toolSearch) forget(old *searchedServer) {
	for _, n := range old.names {
		if t := ts.byName[n]; t != nil && t.Server == old.h.name {
			delete(ts.byName, n)
		}
	}
}

// routedNames are the names p routes to h for the offer's tools, in offer
// order: the preferred qualified name, or the one a collision gave ("" for
// a tool p does not route to h).
func routedNames(p *pool, h *serverHandle, o *offer) []string {
	names := make([]string, len(o.tools))
	for i := range o.tools {
		t := &o.tools[i].tool
		q := t.Name
		if e, ok := p.toolsByName.Get(q); !ok || e.h != h || e.name != t.Definition.Name {
			q = p.knownName("tool", h.name, t.Definition.Name)
			if e, ok := p.toolsByName.Get(q); !ok || e.h != h || e.name != t.Definition.Name {
				q = ""
			}
		}
		names[i] = q
	}
	return names
}

func sameNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// remember keeps a search's query and hits for learning.
func (ts *toolSearch) remember(query string, matches []ToolMatch) {
	if len(matches) == 0 {
		return
	}
	names := make([]string, len(matches))
	for i, m := range matches {
		names[i] = m.Tool.Name
	}
	ts.recentMu.Lock()
	defer ts.recentMu.Unlock()
	if len(ts.recent) == recentSearches {
		copy(ts.recent, ts.recent[1:])
		ts.recent = ts.recent[:recentSearches-1]
	}
	ts.recent = append(ts.recent, recentSearch{at: time.Now(), query: query, names: names})
	ts.anyRecent.Store(true)
}

// called learns from a successful call of name: the latest search of the
// last few minutes that returned it taught the index query → name.
func (ts *toolSearch) called(name string) {
	if !ts.anyRecent.Load() {
		return
	}
	query := ""
	ts.recentMu.Lock()
	cutoff := time.Now().Add(-learnWindow)
	for i := len(ts.recent) - 1; i >= 0 && query == ""; i-- {
		r := ts.recent[i]
		if r.at.Before(cutoff) {
			break
		}
		for _, n := range r.names {
			if n == name {
				query = r.query
				break
			}
		}
	}
	ts.recentMu.Unlock()
	if query == "" {
		return
	}
	ts.mu.Lock()
	ix := ts.index
	ts.mu.Unlock()
	if ix != nil {
		ix.Learn(query, name)
	}
}

// summaryLength bounds ToolMatch.Summary.
const summaryLength = 200

// summarize is a description's first sentence or line, at most about
// summaryLength bytes (cut at a word, ending in "…").
func summarize(desc string) string {
	desc = strings.TrimSpace(desc)
	if i := strings.IndexByte(desc, '\n'); i >= 0 {
		desc = strings.TrimSpace(desc[:i])
	}
	for i := 0; i+1 < len(desc); i++ {
		if (desc[i] == '.' || desc[i] == '!' || desc[i] == '?') && (desc[i+1] == ' ' || desc[i+1] == '\t') {
			desc = desc[:i+1]
			break
		}
	}
	if len(desc) <= summaryLength {
		return desc
	}
	cut := summaryLength
	for cut > 0 && !utf8.RuneStart(desc[cut]) {
		cut--
	}
	if sp := strings.LastIndexByte(desc[:cut], ' '); sp > summaryLength/2 {
		cut = sp
	}
	return strings.TrimRight(desc[:cut], " ,;:") + "…"
}
